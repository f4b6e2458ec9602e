/**
 * Request-level asynchronous rollout: every trajectory runs its own state machine (runTrajectory) and a fixed number
 * of them are in flight at once. A finished trajectory is written and counted the moment it ends, and its slot goes
 * to the next sample, so one slow trajectory never holds up the rest (no batch barrier, no turn barrier).
 */
import { InputError } from "../errors.js";
import type { Trajectory } from "../data/trajectory.js";
import { trajectoryKey } from "../data/trajectory.js";
import type { TrajectoryWriter } from "../data/trajectory-store.js";
import { PromptTooLongError, runTrajectory, type TrajectoryContext } from "./run-trajectory.js";
import { sampleOf, type Prompt, type Sample } from "./sample.js";
import { RolloutStats } from "./stats.js";
import { OVER_SAMPLE_FINISH_REASON, OverSampleAbort, overSampleTarget } from "./over-sample.js";

export interface RolloutRun {
  prompts: AsyncIterable<Prompt> | Iterable<Prompt>;
  /** Samples per prompt. */
  n: number;
  concurrency: number;
  context: Omit<TrajectoryContext, "signal">;
  /** Cancels the run: in-flight trajectories end as aborted and are still recorded. */
  signal?: AbortSignal;
  writer?: TrajectoryWriter;
  /** Trajectory ids to skip (already on disk, for --resume). */
  skipIds?: ReadonlySet<string>;
  /** Skip prompts longer than max_prompt_length instead of failing (verl's filter_overlong_prompts). */
  filterOverlongPrompts?: boolean;
  /**
   * verl's over_sample_rate: once ⌈(1 − rate)·total⌉ trajectories have finished, the running ones are aborted (and
   * recorded as `over_sample`) and no new sample starts. `total` is the number of samples this run would start.
   */
  overSample?: { rate: number; total: number };
  onTrajectory?: (trajectory: Trajectory, stats: RolloutStats) => void;
  onStart?: (sample: Sample) => void;
}

export interface RolloutResult {
  stats: RolloutStats;
  trajectories: Trajectory[] | undefined;
  /** Prompts skipped for length (filter_overlong_prompts). */
  skippedPrompts: number;
  /** Samples skipped because --resume found them on disk. */
  resumedSkipped: number;
  cancelled: boolean;
  /** Trajectories in flight when the run was cancelled; not written, so a resumed run redoes them. */
  cancelledInFlight: number;
  /** Over-sampling: trajectories aborted once enough had finished, and samples never started because of it. */
  overSampleAborted: number;
  overSampleNotStarted: number;
}

async function* samplesOf(run: RolloutRun, counters: { resumedSkipped: number }): AsyncGenerator<Sample> {
  for await (const prompt of run.prompts as AsyncIterable<Prompt>) {
    for (let sampleIndex = 0; sampleIndex < run.n; sampleIndex++) {
      if (run.skipIds?.has(trajectoryKey(prompt.dataIndex, sampleIndex))) {
        counters.resumedSkipped += 1;
        continue;
      }
      yield sampleOf(prompt, sampleIndex);
    }
  }
}

/**
 * Runs every sample and resolves when all have finished. Without a writer the trajectories are returned in memory
 * (train keeps a step's batch); with one they are streamed to disk and not kept.
 */
export async function runRollout(run: RolloutRun): Promise<RolloutResult> {
  const stats = new RolloutStats();
  const kept: Trajectory[] | undefined = run.writer ? undefined : [];
  const counters = { resumedSkipped: 0 };
  const skippedPromptIndexes = new Set<number>();
  const controller = new AbortController();
  const onCancel = () => controller.abort(run.signal?.reason);
  run.signal?.addEventListener("abort", onCancel, { once: true });
  if (run.signal?.aborted) controller.abort();
  const context: TrajectoryContext = { ...run.context, signal: controller.signal };
  const source = samplesOf(run, counters);
  let failure: unknown;
  let cancelledInFlight = 0;
  let overSampleAborted = 0;
  const target = run.overSample ? overSampleTarget(run.overSample.total, run.overSample.rate) : Infinity;
  const overSampling = target < (run.overSample?.total ?? Infinity);
  let finished = 0;
  let overlongSamples = 0;

  // The sample source is shared by all workers; pulls are serialised so each sample is taken exactly once.
  let pulling: Promise<unknown> = Promise.resolve();
  const nextSample = (): Promise<IteratorResult<Sample>> => {
    const next = pulling.then(() => source.next());
    pulling = next.catch(() => undefined);
    return next;
  };

  const worker = async (): Promise<void> => {
    while (failure === undefined && !controller.signal.aborted) {
      const next = await nextSample();
      if (next.done) return;
      const sample = next.value;
      if (skippedPromptIndexes.has(sample.dataIndex)) {
        overlongSamples += 1;
        continue;
      }
      run.onStart?.(sample);
      let trajectory: Trajectory;
      try {
        trajectory = await runTrajectory(sample, context);
      } catch (err) {
        if (err instanceof PromptTooLongError && run.filterOverlongPrompts) {
          skippedPromptIndexes.add(sample.dataIndex);
          overlongSamples += 1;
          continue;
        }
        if (err instanceof PromptTooLongError) {
          throw new InputError(err.message, { hint: "raise data.max_prompt_length, or set data.filter_overlong_prompts: true" });
        }
        throw err;
      }
      // A trajectory cut short by Ctrl-C is not a result: it is left off the file so --resume runs it again.
      if (trajectory.finish_reason === "cancelled") {
        cancelledInFlight += 1;
        continue;
      }
      if (trajectory.finish_reason === OVER_SAMPLE_FINISH_REASON) overSampleAborted += 1;
      else finished += 1;
      if (overSampling && finished >= target && !controller.signal.aborted) {
        controller.abort(new OverSampleAbort(finished, run.overSample!.total));
      }
      stats.add(trajectory);
      if (run.writer) await run.writer.write(trajectory);
      else kept!.push(trajectory);
      run.onTrajectory?.(trajectory, stats);
    }
  };

  const workers = Array.from({ length: Math.max(1, run.concurrency) }, () =>
    worker().catch((err) => {
      if (failure === undefined) failure = err;
      controller.abort(err);
    }),
  );
  await Promise.all(workers);
  run.signal?.removeEventListener("abort", onCancel);
  if (failure !== undefined) throw failure;
  return {
    stats,
    trajectories: kept,
    skippedPrompts: skippedPromptIndexes.size,
    resumedSkipped: counters.resumedSkipped,
    cancelled: run.signal?.aborted ?? false,
    cancelledInFlight,
    overSampleAborted,
    overSampleNotStarted: overSampling && controller.signal.reason instanceof OverSampleAbort
      ? Math.max(0, run.overSample!.total - finished - overSampleAborted - cancelledInFlight - overlongSamples)
      : 0,
  };
}
