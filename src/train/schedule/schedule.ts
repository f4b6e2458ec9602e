/**
 * The training scheduler: when generation runs and when the trainer updates, for each async_training.mode.
 * - sync: a step's batch is generated, then trained on and synced; the next batch starts after the step's records,
 *   exactly as the loop did before there were modes.
 * - one_step_off: step k+1's batch starts the moment step k's batch is ready, so it is generated while the trainer
 *   updates on step k (verl's one_step_off_policy). Every batch after the first lags one version. Without partial
 *   rollouts step k's sync waits for batch k+1 to be complete; with them it cuts what is generating.
 * - fully_async: groups stream into a buffer (fully-async.ts); a step trains on the first train_batch_size ready.
 * The schedule measures what a step needs to tune the split: staleness, stale drops, trainer and generator idle time.
 */
import { setMaxListeners } from "node:events";
import { ActivityMeter, IdleWindow } from "./activity.js";
import { runFullyAsync } from "./fully-async.js";
import type { ScheduleOptions, ScheduleResult, StepReport } from "./types.js";

/** What the mode runners share: the meters, the version the engine serves, and the run-wide cancel. */
export interface ScheduleContext<B> {
  generating: ActivityMeter;
  /** The step whose weights the engine serves (firstStep − 1 until the first sync; behind after a failed sync). */
  served: number;
  /** Syncs the trainer has reached, failed ones included: its parameter version, counted from this run's start. */
  syncs: number;
  /** `syncs` at the sync whose weights the engine serves. */
  servedSyncs: number;
  /** Aborts with the caller's signal, and when the schedule ends or fails: in-flight generation stops. */
  cancel: AbortController;
  /**
   * The update of `step`, and its sync unless `sync` is false (once `syncWaitsFor` has settled, when given, the
   * trainer idle meanwhile), timed; then the step's report for `finish`.
   */
  train(
    step: number, batch: B, report: Pick<StepReport, "staleness" | "syncStaleness" | "droppedStale">, sync?: boolean, syncWaitsFor?: Promise<unknown>,
  ): Promise<StepReport>;
}

export async function runSchedule<B, G>(options: ScheduleOptions<B, G>): Promise<ScheduleResult> {
  const clock = options.clock ?? (() => performance.now());
  const training = new ActivityMeter(clock);
  const generating = new ActivityMeter(clock);
  const idle = new IdleWindow(clock, [training, generating]);
  const cancel = new AbortController();
  // Every group in flight (fully async) listens on it: hundreds are expected, not a leak.
  setMaxListeners(0, cancel.signal);
  const onStop = () => cancel.abort(options.signal.reason);
  if (options.signal.aborted) onStop();
  options.signal.addEventListener("abort", onStop, { once: true });
  const context: ScheduleContext<B> = {
    generating,
    served: options.firstStep - 1,
    syncs: 0,
    servedSyncs: 0,
    cancel,
    async train(step, batch, partial, sync = true, syncWaitsFor) {
      training.begin();
      let outcome: { synced: boolean } | void;
      try {
        outcome = await options.trainer.train(step, batch, sync, syncWaitsFor && (() => idleUntil(syncWaitsFor)));
      } finally {
        training.end();
      }
      if (sync) {
        context.syncs += 1;
        if (outcome?.synced !== false) {
          context.served = step;
          context.servedSyncs = context.syncs;
        }
      }
      const [trainerIdle, generatorIdle] = idle.next();
      return { ...partial, trainerIdle: trainerIdle!, generatorIdle: generatorIdle! };
    },
  };
  /** The trainer waits, neither updating nor syncing: idle for trainer/idle_ratio. A failed batch is runBatches' to report. */
  const idleUntil = async (settled: Promise<unknown>): Promise<void> => {
    training.end();
    try {
      await settled.catch(() => undefined);
    } finally {
      training.begin();
    }
  };
  try {
    return options.mode === "fully_async" ? await runFullyAsync(options, context) : await runBatches(options, context);
  } finally {
    cancel.abort();
    options.signal.removeEventListener("abort", onStop);
  }
}

interface PendingBatch<B> {
  step: number;
  /** The version served when its generation started: its staleness is counted from there (every update syncs here). */
  version: number;
  batch: Promise<B>;
}

/** sync and one_step_off: whole batches, the next one started before (one_step_off) or after (sync) the update. */
async function runBatches<B, G>(options: ScheduleOptions<B, G>, context: ScheduleContext<B>): Promise<ScheduleResult> {
  const { firstStep, lastStep, generator, trainer } = options;
  const overlap = options.mode === "one_step_off";
  // Without partial rollouts a sync must not land inside the batch generating meanwhile: its later turns would be
  // sampled by the new weights, and which ones would depend on the timing.
  const syncAfterNext = overlap && options.partialRollout === false;
  const start = (step: number): PendingBatch<B> => {
    context.generating.begin();
    const batch = generator.batch(step, context.cancel.signal).finally(() => context.generating.end());
    return { step, version: context.served, batch };
  };
  let next: PendingBatch<B> | undefined = firstStep <= lastStep ? start(firstStep) : undefined;
  let steps = 0;
  try {
    for (let step = firstStep; step <= lastStep; step++) {
      const pending: PendingBatch<B> = next!;
      next = undefined;
      const batch = await pending.batch;
      if (options.signal.aborted) return { steps, stopped: true }; // its prompts go back (the caller's cursor)
      if (overlap && step < lastStep) next = start(step + 1);
      const staleness = new Array<number>(generator.size(batch)).fill(step - 1 - pending.version);
      const report = await context.train(step, batch, { staleness, syncStaleness: staleness, droppedStale: 0 }, true, syncAfterNext ? next?.batch : undefined);
      await trainer.finish(step, batch, report);
      steps += 1;
      if (options.signal.aborted) return { steps, stopped: step < lastStep };
      if (!overlap && step < lastStep) next = start(step + 1);
    }
    return { steps, stopped: false };
  } finally {
    if (next) {
      // A batch started ahead that will not be trained (Ctrl-C, a failure): stop it and let it settle, so what it
      // drew is known before the caller saves where the data stands.
      context.cancel.abort();
      await next.batch.catch(() => undefined);
    }
  }
}
