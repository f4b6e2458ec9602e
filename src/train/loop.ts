/**
 * The GRPO loop. Each step: rollout (prompts from the seeded cursor, n trajectories each, groups with equal rewards
 * dropped and refilled), scoring (the step's metrics), the update in the worker (log-probs, advantages, losses), weight
 * sync to the engine, then the step's record: its rollouts, its metrics line, validation and a checkpoint when due.
 * Each stage is a module of its own; this file wires them. The same code runs the CPU demo and an 8×H100 run.
 */
import { AgentrlError } from "../errors.js";
import type { SglangClient } from "../engine/index.js";
import type { Trajectory } from "../data/trajectory.js";
import { openTrajectoryWriter } from "../data/trajectory-store.js";
import type { Prompt } from "../rollout/sample.js";
import type { RolloutParts } from "../rollout/setup.js";
import type { WorkerClient } from "./worker/index.js";
import { totalSteps, type TrainConfig } from "./config.js";
import { RunProgress, type RunOutcome } from "./checkpoint.js";
import type { RunDir, RunState } from "./run-dir.js";
import type { TrainReporter } from "./reporter.js";
import { rolloutBatch, stepRollout, type RolloutBatch } from "./rollout.js";
import { batchMetrics } from "./step-metrics.js";
import { updatePolicy, type UpdateResult } from "./update.js";
import { releaseEngineMemory, syncWeights } from "./weight-sync.js";
import { validate } from "./validate.js";

export interface TrainLoopOptions {
  config: TrainConfig;
  runDir: RunDir;
  resumeState: RunState | undefined;
  client: SglangClient;
  parts: RolloutParts;
  /**
   * The training worker. Absent only with trainer.val_only and no checkpoint to load: validating model.path needs the
   * engine alone, and a big model's trainer copy would only take GPU memory.
   */
  worker: WorkerClient | undefined;
  trainPrompts: Prompt[];
  valPrompts: Prompt[];
  /** Also receives every metrics record written to metrics.jsonl (TensorBoard). */
  onMetrics?: (record: Record<string, unknown>) => void;
  /** Set on Ctrl-C: the loop checkpoints at the next safe point and returns. */
  stop: AbortSignal;
  reporter: TrainReporter;
}

export async function trainLoop(options: TrainLoopOptions): Promise<RunOutcome> {
  const { config, runDir, stop } = options;
  const progress = new RunProgress(runDir, options.trainPrompts.length, config.data, options.resumeState);
  const stages = trainStages(options, progress);
  const total = totalSteps(config, options.trainPrompts.length);
  runDir.clearScratch();
  try {
    if (progress.resumed) {
      await progress.resume(stages.worker(), options.reporter, { keepMetrics: config.trainer.val_only, unit: "prompt" });
      await stages.sync(progress.step);
    }
    if (config.trainer.val_only) {
      // verl's trainer.val_only: validate the current weights (model.path, or the checkpoint resumed from), log the
      // metrics line at the current step, and stop before the first training step.
      const metrics = await stages.validate(progress.step);
      if (stop.aborted) return progress.outcome(true); // partial: not logged
      stages.record(progress.step, metrics);
      return progress.outcome(false);
    }
    if (progress.step === 0 && config.trainer.val_before_train) stages.record(0, await stages.validate(0));
    while (progress.step < total && !stop.aborted) {
      if (!(await trainStep(progress.step + 1, total, stages, options))) break;
    }
    if (stop.aborted) await progress.saveOnStop(stages.worker(), options.reporter);
    return progress.outcome(stop.aborted);
  } catch (err) {
    throw progress.withResumeHint(err, "train");
  } finally {
    runDir.removeScratch();
  }
}

/** One GRPO step. False when Ctrl-C came during its rollout: the step is forgotten, and redone on resume. */
async function trainStep(step: number, total: number, stages: TrainStages, options: TrainLoopOptions): Promise<boolean> {
  const { config, runDir, reporter, stop } = options;
  const { progress } = stages;
  const started = performance.now();
  const cursorAtStart = progress.cursor.position;
  reporter.phase(step, "rollout");
  const batch = await stages.rollout(step);
  if (stop.aborted) {
    progress.cursor.restore(cursorAtStart); // the resumed run takes the same prompts again
    return false;
  }
  const metrics = batchMetrics(batch, config.data.max_response_length);
  const timing: Record<string, number> = { "timing_s/gen": batch.seconds };
  if (batch.kept.length > 0) {
    const update = await stages.update(step, batch.kept);
    Object.assign(metrics, update.metrics);
    Object.assign(timing, update.timing);
    const t0 = performance.now();
    await stages.sync(step); // the next step samples from the updated policy
    timing["timing_s/update_weights"] = (performance.now() - t0) / 1000;
  } else {
    reporter.note(`step ${step}: no trajectory to train on (all groups dropped or failed); weights unchanged`);
  }
  await writeRollouts(runDir.rolloutFile(step), batch.all);
  progress.step = step;
  const last = step >= total;
  const testFreq = config.trainer.test_freq;
  if (testFreq > 0 && (step % testFreq === 0 || last)) Object.assign(metrics, await stages.validate(step));
  timing["timing_s/step"] = (performance.now() - started) / 1000;
  Object.assign(metrics, timing);
  const weightVersion = Number(progress.weightVersion ?? NaN);
  if (Number.isFinite(weightVersion)) metrics.weight_version = weightVersion;
  stages.record(step, metrics);
  reporter.stepDone(step, metrics);
  if (progress.due(config.trainer.save_freq, last, stop.aborted)) await stages.checkpoint();
  return true;
}

/** The stages of a step, each given the slice of the run it needs. */
interface TrainStages {
  progress: RunProgress;
  worker(): WorkerClient;
  rollout(step: number): Promise<RolloutBatch>;
  update(step: number, kept: Trajectory[]): Promise<UpdateResult>;
  sync(step: number): Promise<void>;
  validate(step: number): Promise<Record<string, number>>;
  checkpoint(): Promise<void>;
  /** Appends a metrics line (metrics.jsonl, TensorBoard). */
  record(step: number, metrics: Record<string, number>): void;
}

function trainStages(options: TrainLoopOptions, progress: RunProgress): TrainStages {
  const { config, runDir, client, reporter } = options;
  const rollout = config.actor_rollout_ref.rollout;
  const colocate = config.trainer.colocate;
  const trainRollout = stepRollout(options, "train");
  const valRollout = stepRollout(options, "val");
  const worker = (): WorkerClient => {
    if (!options.worker) throw new AgentrlError("internal: the training worker was not started");
    return options.worker;
  };
  const plan = { groups: config.data.train_batch_size, n: rollout.n, filter: config.algorithm.filter_groups };
  return {
    progress,
    worker,
    rollout: (step) => rolloutBatch(step, { prompts: options.trainPrompts, cursor: progress.cursor }, trainRollout, plan, options.stop),
    async update(step, kept) {
      await releaseEngineMemory(client, colocate);
      return updatePolicy(step, kept, worker(), { scratchDir: runDir.scratchDir, padTokenId: options.parts.model.eosTokenIds[0] ?? 0, reporter });
    },
    async sync(step) {
      progress.weightVersion = await syncWeights(step, { worker: worker(), client, runDir, colocate, reporter });
    },
    validate: (step) => validate(step, options.valPrompts, valRollout, { n: rollout.val_kwargs.n, runDir, reporter }),
    checkpoint: () => progress.save(worker(), reporter),
    record(step, metrics) {
      const line = { step, time: Date.now() / 1000, ...metrics };
      runDir.appendMetrics(line);
      options.onMetrics?.(line);
    },
  };
}

/** The step's trajectories, every round's, as its rollout file (agentrl inspect reads it). */
async function writeRollouts(file: string, trajectories: readonly Trajectory[]): Promise<void> {
  const writer = await openTrajectoryWriter(file, { force: true });
  for (const t of trajectories) await writer.write(t);
  await writer.close();
}
