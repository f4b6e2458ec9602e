/**
 * The trainer side of a GRPO step, as the schedule drives it (schedule/): the update and the weight sync (`train`),
 * then the step's record (`finish`): its rollouts file, its metrics line with the step's time budget, validation
 * and a checkpoint when due, while generation for later steps may run.
 *
 * The step budget (docs/run-folder.md): `timing_s/step` is the wall time from the end of the previous step's record
 * (after its checkpoint) to the end of this step's rollouts file: generation (sync mode), update, sync and record.
 * Validation is timed on its own (`timing_s/testing`, verl's name) after that point, and the checkpoint after the
 * metrics line, so neither counts in `timing_s/step`. In one_step_off with partial rollouts the next step's generation
 * overlaps this step's validation; its `timing_s/gen` may then exceed its `timing_s/step`. Without them the sync
 * waits for that generation (`timing_s/wait_gen`), and validation runs after it.
 */
import type { Trajectory } from "../data/trajectory.js";
import { openTrajectoryWriter } from "../data/trajectory-store.js";
import type { WorkerClient } from "./worker/index.js";
import type { TrainConfig } from "./config.js";
import type { RunProgress } from "./checkpoint.js";
import type { RunDir } from "./run-dir.js";
import type { TrainReporter } from "./reporter.js";
import type { RolloutBatch, StepRollout } from "./rollout.js";
import type { TrainGenerator } from "./generation.js";
import { stepScheduleMetrics, type Trainer } from "./schedule/index.js";
import { batchMetrics } from "./step-metrics.js";
import type { UpdateResult } from "./update.js";

/** The stages of a step, each given the slice of the run it needs (loop.ts builds them). */
export interface TrainStages {
  progress: RunProgress;
  worker(): WorkerClient;
  trainRollout: StepRollout;
  update(step: number, kept: Trajectory[]): Promise<UpdateResult>;
  /** The sync after step's update; false when the servers refused it and keep serving the version they had. */
  sync(step: number): Promise<boolean>;
  /** The sync that makes the engine serve a resumed checkpoint: nothing generates yet, and a failure stops the run. */
  resumeSync(step: number): Promise<void>;
  validate(step: number): Promise<Record<string, number>>;
  checkpoint(): Promise<void>;
  /** Appends a metrics line (metrics.jsonl, TensorBoard). */
  record(step: number, metrics: Record<string, number>): void;
}

export interface StepTrainerDeps {
  config: Pick<TrainConfig, "trainer" | "data">;
  runDir: Pick<RunDir, "rolloutFile">;
  reporter: TrainReporter;
  stop: AbortSignal;
  /** Milliseconds, for the step's timings (performance.now unless a test brings its own). */
  clock?: () => number;
}

/** The trainer side of a step: update and sync (train), then the step's record (finish) while generation goes on. */
export function stepTrainer(total: number, stages: TrainStages, generator: Pick<TrainGenerator, "taken">, deps: StepTrainerDeps): Trainer<RolloutBatch> {
  const { config, runDir, reporter, stop } = deps;
  const clock = deps.clock ?? (() => performance.now());
  const { progress } = stages;
  const updates = new Map<number, Record<string, number>>();
  let stepStarted = clock();
  /** Updates the engine has not received (trigger_parameter_sync_step > 1, or a failed sync). */
  let unsynced = false;
  return {
    async train(step, batch, sync, waitBeforeSync) {
      generator.taken(batch);
      const metrics: Record<string, number> = {};
      let synced = true;
      if (batch.kept.length > 0) {
        const update = await stages.update(step, batch.kept);
        Object.assign(metrics, update.metrics, update.timing);
        unsynced = true;
      } else {
        reporter.note(`step ${step}: no trajectory to train on (all groups dropped or failed); weights unchanged`);
      }
      if (sync && unsynced) {
        if (waitBeforeSync) await timed(metrics, "timing_s/wait_gen", clock, waitBeforeSync);
        synced = await timed(metrics, "timing_s/update_weights", clock, () => stages.sync(step)); // the next step samples from the updated policy
        unsynced = !synced;
        metrics["weight_sync/failed"] = synced ? 0 : 1;
      }
      updates.set(step, metrics);
      return { synced };
    },
    async finish(step, batch, report) {
      const metrics = batchMetrics(batch, config.data.max_response_length, step);
      Object.assign(metrics, updates.get(step), stepScheduleMetrics(report), generationTimings(batch));
      updates.delete(step);
      await timed(metrics, "timing_s/record", clock, () => writeRollouts(runDir.rolloutFile(step), batch.all));
      progress.step = step;
      const last = step >= total;
      metrics["timing_s/step"] = (clock() - stepStarted) / 1000; // validation and the checkpoint are not the step's
      if (validationDue(config.trainer.test_freq, step, total)) Object.assign(metrics, await timedValidation(stages, step, clock));
      const weightVersion = Number(progress.weightVersion ?? NaN);
      if (Number.isFinite(weightVersion)) metrics.weight_version = weightVersion;
      stages.record(step, metrics);
      reporter.stepDone(step, metrics);
      if (progress.due(config.trainer.save_freq, last, stop.aborted)) await stages.checkpoint();
      stepStarted = clock();
    },
  };
}

/**
 * The generation window's split: the engine busy (at least one /generate request outstanding) and the client (the
 * rest: tools, agent code, bookkeeping while nothing is at the engine).
 */
export function generationTimings(batch: Pick<RolloutBatch, "seconds" | "engineBusySeconds">): Record<string, number> {
  const busy = Math.min(Math.max(0, batch.engineBusySeconds), batch.seconds);
  return { "timing_s/gen": batch.seconds, "timing_s/gen_engine_busy": busy, "timing_s/gen_client": batch.seconds - busy };
}

/** Validation of `step`'s weights, with its wall time as `timing_s/testing` (verl's name). */
export async function timedValidation(stages: Pick<TrainStages, "validate">, step: number, clock: () => number = () => performance.now()): Promise<Record<string, number>> {
  const started = clock();
  const metrics = await stages.validate(step);
  return { ...metrics, "timing_s/testing": (clock() - started) / 1000 };
}

/** Runs `stage` and records its wall time under `key`, in seconds, whether it returns or throws. */
async function timed<T>(metrics: Record<string, number>, key: string, clock: () => number, stage: () => Promise<T>): Promise<T> {
  const started = clock();
  try {
    return await stage();
  } finally {
    metrics[key] = (clock() - started) / 1000;
  }
}

/** trainer.test_freq: validate every test_freq steps and after the last. */
export function validationDue(testFreq: number, step: number, last: number): boolean {
  return testFreq > 0 && (step % testFreq === 0 || step >= last);
}

/** The step's trajectories, every round's, as its rollout file (agentrl inspect reads it). */
async function writeRollouts(file: string, trajectories: readonly Trajectory[]): Promise<void> {
  const writer = await openTrajectoryWriter(file, { force: true });
  for (const t of trajectories) await writer.write(t);
  await writer.close();
}
