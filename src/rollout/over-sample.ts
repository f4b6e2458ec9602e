/**
 * Over-sampling with early abort, verl's `over_sample_rate`: once ⌈(1 − rate)·N⌉ of a batch's N trajectories have
 * finished, the ones still running are aborted, so the batch no longer waits for its slowest few. The aborted ones
 * are recorded (status `aborted`, finish_reason `over_sample`) and never trained on, which is what verl's all-zero
 * mask on aborted requests amounts to. Trade-offs (biased towards short answers, wasted tokens): docs/scheduling.md.
 */

/** The finish reason of a trajectory cut short by over-sampling. */
export const OVER_SAMPLE_FINISH_REASON = "over_sample";

/** The abort reason runRollout uses, so a trajectory can tell over-sampling apart from Ctrl-C. */
export class OverSampleAbort extends Error {
  constructor(readonly finished: number, readonly total: number) {
    super(`over-sampling: ${finished} of ${total} trajectories finished; the rest are aborted`);
  }
}

/** How many of `total` trajectories must finish before the rest are aborted; `total` when the rate is 0. */
export function overSampleTarget(total: number, rate: number): number {
  if (!(rate > 0)) return total;
  return Math.min(total, Math.max(1, Math.ceil(total * (1 - rate))));
}
