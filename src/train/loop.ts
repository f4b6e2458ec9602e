/**
 * The GRPO loop. Each step: rollout (prompts from the seeded cursor, n trajectories each, groups with equal rewards
 * dropped and refilled), scoring (the step's metrics), the update in the worker (log-probs, advantages, losses), weight
 * sync to the engine, then the step's record (step-trainer.ts): its rollouts, its metrics line with the step's time
 * budget, validation and a checkpoint when due.
 * When generation runs relative to training is async_training.mode's (schedule/): after the step (sync), during the
 * previous step's update (one_step_off), or all the time (fully_async). Each stage is a module of its own; this file
 * wires them. The same code runs the CPU demo and an 8×H100 run.
 */
import { AgentrlError } from "../errors.js";
import type { SglangClient } from "../engine/index.js";
import type { Prompt } from "../rollout/sample.js";
import type { Trajectory } from "../data/trajectory.js";
import type { RolloutParts } from "../rollout/setup.js";
import type { WorkerClient } from "./worker/index.js";
import { totalSteps, type TrainConfig } from "./config.js";
import { RunProgress, type RunOutcome } from "./checkpoint.js";
import type { RunDir, RunState } from "./run-dir.js";
import type { TrainReporter } from "./reporter.js";
import { stepRollout } from "./rollout.js";
import { trainGenerator } from "./generation.js";
import { PendingDraws } from "./pending-draws.js";
import { runSchedule } from "./schedule/index.js";
import { stepTrainer, timedValidation, validationDue, type TrainStages } from "./step-trainer.js";
import { updatePolicy } from "./update.js";
import { releaseEngineMemory, StepSync, WeightSync } from "./weight-sync.js";
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
  /** Also receives every metrics record written to metrics.jsonl (TensorBoard, wandb). */
  onMetrics?: (record: Record<string, unknown>) => void;
  /** Receives each validation's trajectories, before its metrics line (wandb's table of samples). */
  onValidation?: (step: number, trajectories: readonly Trajectory[]) => void;
  /** Set on Ctrl-C: the loop checkpoints at the next safe point and returns. */
  stop: AbortSignal;
  reporter: TrainReporter;
}

export async function trainLoop(options: TrainLoopOptions): Promise<RunOutcome> {
  const { config, runDir, stop } = options;
  const progress = new RunProgress(runDir, options.trainPrompts.length, config.data, options.resumeState, config.trainer.max_actor_ckpt_to_keep);
  const draws = new PendingDraws(progress.cursor);
  progress.cursorToSave = () => draws.checkpoint();
  const stages = trainStages(options, progress);
  const total = totalSteps(config, options.trainPrompts.length);
  runDir.clearScratch();
  try {
    if (progress.resumed) {
      await progress.resume(stages.worker(), options.reporter, { keepMetrics: config.trainer.val_only, unit: "prompt" });
      // Nothing generates yet, and the engine must serve the checkpoint before anything does: a failure stops here.
      await stages.resumeSync(progress.step);
    }
    if (config.trainer.val_only) {
      // verl's trainer.val_only: validate the current weights (model.path, or the checkpoint resumed from), log the
      // metrics line at the current step, and stop before the first training step.
      const metrics = await timedValidation(stages, progress.step);
      if (stop.aborted) return progress.outcome(true); // partial: not logged
      stages.record(progress.step, metrics);
      return progress.outcome(false);
    }
    if (progress.step === 0 && config.trainer.val_before_train) stages.record(0, await timedValidation(stages, 0));
    if (progress.step < total && !stop.aborted) await trainSteps(progress.step + 1, total, stages, draws, options);
    // Prompts drawn for steps that were not trained go back: the resumed run takes them again.
    progress.cursor.restore(draws.checkpoint());
    if (stop.aborted) await progress.saveOnStop(stages.worker(), options.reporter);
    return progress.outcome(stop.aborted);
  } catch (err) {
    throw progress.withResumeHint(err, "train");
  } finally {
    runDir.removeScratch();
  }
}

/** Steps first..last, as async_training.mode schedules their generation. A step Ctrl-C caught generating is forgotten. */
async function trainSteps(first: number, last: number, stages: TrainStages, draws: PendingDraws, options: TrainLoopOptions): Promise<void> {
  const { config } = options;
  const rollout = config.actor_rollout_ref.rollout;
  const { filter_groups: filter } = config.algorithm;
  const plan = { groups: config.data.train_batch_size, n: rollout.n, filter };
  const generator = trainGenerator({
    prompts: options.trainPrompts, cursor: stages.progress.cursor, draws, rollout: stages.trainRollout, plan, reporter: options.reporter,
    maxConcurrency: rollout.max_concurrency,
    engineBusy: () => options.client.busySeconds(),
  });
  await runSchedule({
    mode: config.async_training.mode,
    firstStep: first,
    lastStep: last,
    generator,
    trainer: stepTrainer(last, stages, generator, options),
    signal: options.stop,
    partialRollout: config.async_training.partial_rollout,
    fullyAsync: {
      groupsPerBatch: config.data.train_batch_size,
      stalenessThreshold: config.async_training.staleness_threshold,
      syncEvery: config.async_training.trigger_parameter_sync_step,
      // Validation samples from the engine: it must serve the step validated.
      mustSync: (step) => validationDue(config.trainer.test_freq, step, last),
      // Trajectories share max_concurrency slots (generation.ts); admission alone bounds the groups drawn ahead.
      maxGroupsInFlight: Number.POSITIVE_INFINITY,
      maxDiscardedPerStep: (filter.enable ? filter.max_num_gen_batches : 1) * config.data.train_batch_size,
    },
  });
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
  const { update_weights, update_weights_bucket_megabytes } = rollout;
  const async = config.async_training;
  let weightSync: WeightSync | undefined;
  const sync = (): WeightSync =>
    (weightSync ??= new WeightSync(
      {
        ...update_weights, bucketMegabytes: update_weights_bucket_megabytes,
        loraAdapter: config.actor_rollout_ref.model.lora_rank > 0 && !config.actor_rollout_ref.model.lora.merge,
      },
      {
        worker: worker(), client, runDir, colocate, reporter,
        // Only an async mode generates while the trainer syncs; sync mode has nothing in flight to pause.
        partialRollout: async.mode !== "sync" && async.partial_rollout,
      },
    ));
  let stepSync: StepSync | undefined;
  return {
    progress,
    worker,
    trainRollout,
    async update(step, kept) {
      await releaseEngineMemory(client, colocate);
      return updatePolicy(step, kept, worker(), { scratchDir: runDir.scratchDir, padTokenId: options.parts.model.eosTokenIds[0] ?? 0, reporter });
    },
    async sync(step) {
      stepSync ??= new StepSync(sync(), reporter);
      const { version, failed } = await stepSync.sync(step, progress.weightVersion);
      progress.weightVersion = version;
      return !failed;
    },
    async resumeSync(step) {
      progress.weightVersion = await sync().sync(step);
    },
    validate: (step) =>
      validate(step, options.valPrompts, valRollout, { n: rollout.val_kwargs.n, runDir, reporter, onTrajectories: options.onValidation }),
    checkpoint: () => progress.save(worker(), reporter),
    record(step, metrics) {
      const line = { step, time: Date.now() / 1000, ...metrics };
      runDir.appendMetrics(line);
      options.onMetrics?.(line);
    },
  };
}
