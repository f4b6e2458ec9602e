/**
 * The GRPO loop. Each step: take a batch of prompts from the seeded cursor, roll out n trajectories per prompt
 * against the engine, score them, (optionally) drop groups with equal rewards and refill, send the batch to the
 * worker for log-probs and the update, save the weights and push them to the engine, log, checkpoint, validate.
 * The same code runs the CPU demo and an 8×H100 run; only the config differs.
 */
import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { WorkerError, AgentrlError } from "../errors.js";
import type { SglangClient } from "../engine/index.js";
import type { Trajectory } from "../data/trajectory.js";
import { openTrajectoryWriter } from "../data/trajectory-store.js";
import type { Prompt } from "../rollout/sample.js";
import { runRollout } from "../rollout/run-rollout.js";
import { trajectoryContext, type RolloutParts } from "../rollout/setup.js";
import type { RolloutStats } from "../rollout/stats.js";
import { readSafetensors, writeBatch, type TrajectoryRow, type WorkerClient } from "./worker/index.js";
import type { TrainConfig } from "./config.js";
import { DataCursor } from "./data-cursor.js";
import type { RunDir, RunState } from "./run-dir.js";
import { trajectoryMetrics, validationMetrics } from "./step-metrics.js";
import { selectGroups } from "./select-groups.js";

export type Phase = "rollout" | "log_prob" | "update" | "sync" | "checkpoint" | "validate";

/** What the console (or --json) shows; the loop never prints by itself. */
export interface TrainReporter {
  phase(step: number, phase: Phase): void;
  rolloutProgress(step: number, done: number, total: number, stats: RolloutStats): void;
  stepDone(step: number, metrics: Record<string, number>): void;
  validationDone(step: number, metrics: Record<string, number>): void;
  note(message: string): void;
}

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

export interface TrainLoopResult {
  lastStep: number;
  stopped: boolean;
  lastCheckpoint: string | undefined;
}

export function totalSteps(config: TrainConfig, trainSize: number): number {
  if (config.trainer.total_training_steps !== null) return config.trainer.total_training_steps;
  return Math.max(1, Math.floor((trainSize * config.trainer.total_epochs) / config.data.train_batch_size));
}

/** Optimizer steps per training step: one per mini-batch of prompts, for each of ppo_epochs passes. */
export function optimizerStepsPerStep(config: TrainConfig): number {
  const actor = config.actor_rollout_ref.actor;
  const miniBatch = actor.ppo_mini_batch_size ?? config.data.train_batch_size;
  return Math.ceil(config.data.train_batch_size / miniBatch) * actor.ppo_epochs;
}

/**
 * The run's optimizer steps, what the learning-rate schedule spans (cosine end, warm-up ratio). An upper bound: a step
 * whose groups were dropped (dynamic sampling, failures) makes fewer, so a cosine then ends a little above its minimum.
 */
export function totalOptimizerSteps(config: TrainConfig, trainSize: number): number {
  return totalSteps(config, trainSize) * optimizerStepsPerStep(config);
}

export async function trainLoop(options: TrainLoopOptions): Promise<TrainLoopResult> {
  const { config, runDir, client, parts, reporter } = options;
  const worker = (): WorkerClient => {
    if (!options.worker) throw new AgentrlError("internal: the training worker was not started");
    return options.worker;
  };
  const rollout = config.actor_rollout_ref.rollout;
  const total = totalSteps(config, options.trainPrompts.length);
  const cursor = new DataCursor(
    options.trainPrompts.length,
    config.data.seed,
    config.data.shuffle,
    options.resumeState ? { ...options.resumeState.cursor } : undefined,
  );
  // In the run folder, not $TMPDIR: a run killed mid-step leaves its batch files where its next start clears them.
  const scratch = runDir.scratchDir;
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  const padTokenId = parts.model.eosTokenIds[0] ?? 0;
  let step = options.resumeState?.step ?? 0;
  let lastCheckpoint = options.resumeState ? path.join(runDir.root, options.resumeState.checkpoint) : undefined;
  let weightVersion: string | null = options.resumeState?.weight_version ?? null;

  const lengths = { maxPromptLength: config.data.max_prompt_length, maxResponseLength: config.data.max_response_length };
  const validationRollout = { ...rollout, temperature: rollout.val_kwargs.temperature, top_p: rollout.val_kwargs.top_p, top_k: rollout.val_kwargs.top_k };
  const rolloutContext = (forStep: number, validation: boolean) =>
    trajectoryContext(parts, client, validation ? validationRollout : rollout, lengths, forStep);

  const record = (line: Record<string, unknown>): void => {
    runDir.appendMetrics(line);
    options.onMetrics?.(line);
  };

  const pushWeights = async (forStep: number): Promise<void> => {
    reporter.phase(forStep, "sync");
    if (config.trainer.colocate) await client.resumeMemoryOccupation({ tags: ["weights"] });
    await worker().saveWeights(runDir.weightsDir);
    const version = String(forStep);
    const results = await client.updateWeightsFromDisk({ modelPath: path.resolve(runDir.weightsDir), weightVersion: version });
    const failed = results.filter((r) => !r.ok || !r.value.success);
    if (failed.length) {
      const reasons = failed.map((r) => `${r.server}: ${r.ok ? r.value.message : r.error.message}`).join("; ");
      throw new AgentrlError(`weight update failed on ${failed.length} server(s): ${reasons}`, {
        hint: `resume with: agentrl train --config ${runDir.configFile} --resume`,
      });
    }
    if (config.trainer.colocate) await client.resumeMemoryOccupation({ tags: ["kv_cache"] });
    weightVersion = version;
  };

  const checkpoint = async (forStep: number): Promise<void> => {
    reporter.phase(forStep, "checkpoint");
    const dir = runDir.checkpointDir(forStep);
    await worker().saveCheckpoint(dir);
    await runDir.writeState({ step: forStep, cursor: cursor.position, checkpoint: runDir.relative(dir), weight_version: weightVersion });
    lastCheckpoint = dir;
  };

  const validate = async (forStep: number): Promise<Record<string, number>> => {
    if (options.valPrompts.length === 0) return {};
    reporter.phase(forStep, "validate");
    const n = rollout.val_kwargs.n;
    const writer = await openTrajectoryWriter(runDir.rolloutFile(forStep, "val"), { force: true });
    const result = await runRollout({
      prompts: options.valPrompts,
      n,
      concurrency: rollout.max_concurrency,
      context: rolloutContext(forStep, true),
      writer,
      filterOverlongPrompts: config.data.filter_overlong_prompts,
      signal: options.stop,
      onTrajectory: (_t, stats) => reporter.rolloutProgress(forStep, stats.size, options.valPrompts.length * n, stats),
    });
    await writer.close();
    const collected: Trajectory[] = [];
    const { readTrajectories } = await import("../data/trajectory-store.js");
    for await (const t of readTrajectories(runDir.rolloutFile(forStep, "val"))) collected.push(t);
    const metrics = validationMetrics(collected, n);
    void result;
    reporter.validationDone(forStep, metrics);
    return metrics;
  };

  try {
    if (options.resumeState && lastCheckpoint) {
      await worker().loadCheckpoint(lastCheckpoint);
      // Steps after the checkpoint are redone and logged again; a validation-only run redoes none, so it keeps them.
      if (!config.trainer.val_only) runDir.truncateMetricsAfter(step);
      reporter.note(`resumed from ${runDir.relative(lastCheckpoint)} (step ${step}, epoch ${cursor.position.epoch}, prompt ${cursor.position.offset})`);
      await pushWeights(step);
    }
    if (config.trainer.val_only) {
      // verl's trainer.val_only: validate the current weights (model.path, or the checkpoint resumed from), log the
      // metrics line at the current step, and stop before the first training step.
      const metrics = await validate(step);
      if (options.stop.aborted) return { lastStep: step, stopped: true, lastCheckpoint }; // partial: not logged
      record({ step, time: Date.now() / 1000, ...metrics });
      return { lastStep: step, stopped: false, lastCheckpoint };
    }
    if (step === 0 && config.trainer.val_before_train) {
      const metrics = await validate(0);
      record({ step: 0, time: Date.now() / 1000, ...metrics });
    }

    while (step < total && !options.stop.aborted) {
      const current = step + 1;
      const started = performance.now();
      const timing: Record<string, number> = {};
      const cursorAtStart = cursor.position;

      // 1. Rollout, refilled when dynamic sampling drops groups with equal rewards.
      reporter.phase(current, "rollout");
      const wantedGroups = config.data.train_batch_size;
      const filter = config.algorithm.filter_groups;
      const kept: Trajectory[] = [];
      const all: Trajectory[] = [];
      let keptGroups = 0;
      let droppedGroups = 0;
      let rounds = 0;
      let overSampleAborted = 0;
      let loneGroups = 0;
      const genStarted = performance.now();
      while (keptGroups < wantedGroups && rounds < (filter.enable ? filter.max_num_gen_batches : 1) && !options.stop.aborted) {
        const indices = cursor.next(wantedGroups - keptGroups);
        const prompts = indices.map((index, position) => ({
          ...options.trainPrompts[index]!,
          groupId: `${current}.${rounds}.${position}`,
        }));
        const result = await runRollout({
          prompts,
          n: rollout.n,
          concurrency: rollout.max_concurrency,
          context: rolloutContext(current, false),
          filterOverlongPrompts: config.data.filter_overlong_prompts,
          overSample: { rate: rollout.over_sample_rate, total: prompts.length * rollout.n },
          signal: options.stop,
          onTrajectory: (_t, stats) => reporter.rolloutProgress(current, stats.size, prompts.length * rollout.n, stats),
        });
        rounds += 1;
        overSampleAborted += result.overSampleAborted + result.overSampleNotStarted;
        const trajectories = result.trajectories ?? [];
        all.push(...trajectories);
        const selection = selectGroups(trajectories, {
          n: rollout.n,
          dropEqualRewards: filter.enable,
          maxGroups: wantedGroups - keptGroups,
        });
        kept.push(...selection.kept);
        keptGroups += selection.keptGroups;
        droppedGroups += selection.equalRewardGroups;
        loneGroups += selection.loneGroups;
      }
      timing["timing_s/gen"] = (performance.now() - genStarted) / 1000;
      if (options.stop.aborted) {
        // The step did not finish: forget it, so the resumed run takes the same prompts again.
        cursor.restore(cursorAtStart);
        break;
      }

      const metrics: Record<string, number> = {
        ...trajectoryMetrics(all, config.data.max_response_length),
        "batch/trajectories": kept.length,
        "batch/groups": keptGroups,
        "batch/dropped_groups": droppedGroups,
        "batch/gen_rounds": rounds,
        "batch/over_sample_aborted": overSampleAborted,
        "batch/lone_groups_dropped": loneGroups,
      };
      const sampledTokens = all.reduce((a, t) => a + t.response_mask.reduce((x, y) => x + y, 0), 0);
      metrics["perf/throughput"] = sampledTokens / Math.max(timing["timing_s/gen"], 1e-9);

      if (kept.length > 0) {
        // 2. Log-probs and the update, in the worker. Training math (advantages included) lives there.
        if (config.trainer.colocate) await client.releaseMemoryOccupation({});
        const groupIndex = new Map<string, number>();
        const rows: TrajectoryRow[] = kept.map((t) => {
          if (!groupIndex.has(t.group_id)) groupIndex.set(t.group_id, groupIndex.size);
          return {
            ids: [...t.prompt_ids, ...t.response_ids],
            responseMask: [...new Array<number>(t.prompt_ids.length).fill(0), ...t.response_mask],
            reward: t.reward,
            groupId: groupIndex.get(t.group_id)!,
            rolloutLogProbs: [...new Array<number>(t.prompt_ids.length).fill(0), ...t.response_logprobs],
          };
        });
        const batchFile = path.join(scratch, `batch-${current}.safetensors`);
        const logProbFile = path.join(scratch, `logprobs-${current}.safetensors`);
        await writeBatch(batchFile, rows, padTokenId);
        reporter.phase(current, "log_prob");
        let t0 = performance.now();
        const logProbs = await worker().computeLogProbs(batchFile, logProbFile);
        timing["timing_s/old_log_prob"] = (performance.now() - t0) / 1000;
        reporter.phase(current, "update");
        t0 = performance.now();
        const update = await worker().update(batchFile, logProbs.path);
        timing["timing_s/update_actor"] = (performance.now() - t0) / 1000;
        Object.assign(metrics, logProbs.metrics, update.metrics);
        await attachTrainerLogProbs(kept, logProbs.path);
        update.advantages?.forEach((advantage, row) => {
          kept[row]!.advantage = advantage;
        });
        rmSync(batchFile, { force: true });
        rmSync(logProbFile, { force: true });

        // 3. Weight sync: the next step samples from the updated policy.
        t0 = performance.now();
        await pushWeights(current);
        timing["timing_s/update_weights"] = (performance.now() - t0) / 1000;
      } else {
        reporter.note(`step ${current}: no trajectory to train on (all groups dropped or failed); weights unchanged`);
      }

      // 4. Record the step: its rollouts, its metrics line, and a checkpoint when due.
      const writer = await openTrajectoryWriter(runDir.rolloutFile(current), { force: true });
      for (const t of all) await writer.write(t);
      await writer.close();
      step = current;
      const last = step >= total;
      if (config.trainer.test_freq > 0 && (step % config.trainer.test_freq === 0 || last)) {
        Object.assign(metrics, await validate(step));
      }
      timing["timing_s/step"] = (performance.now() - started) / 1000;
      Object.assign(metrics, timing);
      if (weightVersion !== null && Number.isFinite(Number(weightVersion))) metrics.weight_version = Number(weightVersion);
      record({ step, time: Date.now() / 1000, ...metrics });
      reporter.stepDone(step, metrics);
      const saveFreq = config.trainer.save_freq;
      if ((saveFreq > 0 && step % saveFreq === 0) || last || options.stop.aborted) await checkpoint(step);
    }
    if (options.stop.aborted && step > 0 && lastCheckpoint !== runDir.checkpointDir(step)) await checkpoint(step);
    return { lastStep: step, stopped: options.stop.aborted, lastCheckpoint };
  } catch (err) {
    if (err instanceof WorkerError) {
      throw err.withHint(
        lastCheckpoint
          ? `resume from ${runDir.relative(lastCheckpoint)} with: agentrl train --config ${runDir.configFile} --resume`
          : "no checkpoint yet: fix the cause and start again",
      );
    }
    throw err;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Copies the trainer's log-probs of each trajectory's response tokens into the record, for inspect's gap view. */
async function attachTrainerLogProbs(trajectories: Trajectory[], file: string): Promise<void> {
  const tensors = await readSafetensors(file);
  const old = tensors.old_log_probs;
  if (!old || old.dtype !== "F32") return;
  const width = old.shape[1]!;
  trajectories.forEach((t, row) => {
    const start = row * width + t.prompt_ids.length;
    t.trainer_logprobs = Array.from(old.data.subarray(start, start + t.response_ids.length));
  });
}
