/**
 * The rollout stage of a GRPO step: prompts from the data cursor, n trajectories each against the engine, and the
 * groups the step trains on (select-groups.ts, where the rewards decide). With dynamic sampling
 * (algorithm.filter_groups) the groups dropped for equal rewards are refilled with new prompts, for up to
 * filter_groups.max_num_gen_batches rounds. Training rollouts sample with the rollout settings and are over-sampled
 * (over_sample_rate); validation (validate.ts) samples with val_kwargs and writes its trajectory file.
 */
import type { SglangClient } from "../engine/index.js";
import type { Trajectory } from "../data/trajectory.js";
import type { TrajectoryWriter } from "../data/trajectory-store.js";
import type { Prompt } from "../rollout/sample.js";
import { runRollout, type RolloutResult } from "../rollout/run-rollout.js";
import { trajectoryContext, type RolloutParts } from "../rollout/setup.js";
import type { TrainConfig } from "./config.js";
import type { DataCursor } from "./data-cursor.js";
import type { TrainReporter } from "./reporter.js";
import { selectGroups } from "./select-groups.js";
import type { Semaphore } from "../tools/index.js";

export interface RolloutBatch {
  /** What the step trains on: the kept groups' trainable members. */
  kept: Trajectory[];
  /** Every trajectory of every round: the step's rollout file. */
  all: Trajectory[];
  keptGroups: number;
  /** Dropped by dynamic sampling (equal rewards). */
  droppedGroups: number;
  rounds: number;
  /** Aborted or never started by over-sampling. */
  overSampleAborted: number;
  loneGroups: number;
  /** Time spent generating (timing_s/gen): the step's generation window. */
  seconds: number;
  /**
   * Of `seconds`, the time with at least one /generate request outstanding at the engine (timing_s/gen_engine_busy;
   * the client's SglangClient.busySeconds over the same window, so in the async modes any request the client sent in
   * that window counts, a validation's included).
   */
  engineBusySeconds: number;
}

export interface BatchPlan {
  /** Groups (prompts) a step trains on: data.train_batch_size. */
  groups: number;
  n: number;
  filter: { enable: boolean; max_num_gen_batches: number };
}

export async function rolloutBatch(
  step: number,
  data: { prompts: readonly Prompt[]; cursor: DataCursor },
  rollout: StepRollout,
  plan: BatchPlan,
  stop: AbortSignal,
  engineBusy: () => number = () => 0,
): Promise<RolloutBatch> {
  const batch = emptyBatch(0, 0);
  const maxRounds = plan.filter.enable ? plan.filter.max_num_gen_batches : 1;
  const started = performance.now();
  const busyAtStart = engineBusy();
  while (batch.keptGroups < plan.groups && batch.rounds < maxRounds && !stop.aborted) {
    const prompts = data.cursor.next(plan.groups - batch.keptGroups).map((index, position) => ({
      ...data.prompts[index]!,
      groupId: `${step}.${batch.rounds}.${position}`,
    }));
    const result = await rollout(step, prompts, { signal: stop });
    batch.rounds += 1;
    batch.overSampleAborted += result.overSampleAborted + result.overSampleNotStarted;
    const trajectories = result.trajectories ?? [];
    batch.all.push(...trajectories);
    const selection = selectGroups(trajectories, { n: plan.n, dropEqualRewards: plan.filter.enable, maxGroups: plan.groups - batch.keptGroups });
    batch.kept.push(...selection.kept);
    batch.keptGroups += selection.keptGroups;
    batch.droppedGroups += selection.equalRewardGroups;
    batch.loneGroups += selection.loneGroups;
  }
  batch.seconds = (performance.now() - started) / 1000;
  batch.engineBusySeconds = engineBusy() - busyAtStart;
  return batch;
}

function emptyBatch(seconds: number, engineBusySeconds: number): RolloutBatch {
  return { kept: [], all: [], keptGroups: 0, droppedGroups: 0, rounds: 0, overSampleAborted: 0, loneGroups: 0, seconds, engineBusySeconds };
}

/**
 * One runRollout of a step over some prompts: the run's parts, client and length budgets, progress on the status line.
 * `signal` stops it instead of the run's Ctrl-C signal (the scheduler's, which also stops generation ahead of training);
 * `slots` are trajectory slots shared with other runs (fully_async).
 */
export type StepRollout = (step: number, prompts: Prompt[], options?: { writer?: TrajectoryWriter; signal?: AbortSignal; slots?: Semaphore }) => Promise<RolloutResult>;

export interface RolloutDeps {
  config: TrainConfig;
  parts: RolloutParts;
  client: SglangClient;
  reporter: TrainReporter;
  stop: AbortSignal;
}

export function stepRollout({ config, parts, client, reporter, stop }: RolloutDeps, kind: "train" | "val"): StepRollout {
  const rollout = config.actor_rollout_ref.rollout;
  const { val_kwargs } = rollout;
  const sampling = kind === "val" ? { ...rollout, temperature: val_kwargs.temperature, top_p: val_kwargs.top_p, top_k: val_kwargs.top_k } : rollout;
  const n = kind === "val" ? val_kwargs.n : rollout.n;
  const lengths = { maxPromptLength: config.data.max_prompt_length, maxResponseLength: config.data.max_response_length };
  return (step, prompts, { writer, signal, slots } = {}) =>
    runRollout({
      prompts,
      n,
      concurrency: rollout.max_concurrency,
      context: { ...trajectoryContext(parts, client, sampling, lengths, step), ...requestPriority(config, kind, step) },
      ...(writer ? { writer } : {}),
      filterOverlongPrompts: config.data.filter_overlong_prompts,
      ...(kind === "train" ? { overSample: { rate: rollout.over_sample_rate, total: prompts.length * n } } : {}),
      signal: signal ?? stop,
      ...(slots ? { slots } : {}),
      onTrajectory: (_t, stats) => reporter.rolloutProgress(step, stats.size, prompts.length * n, stats),
    });
}

/**
 * async_training.engine_priority: training requests carry −step, so the engine takes an older group's waiting
 * requests first (SGLang: higher values first). Validation runs alone and needs none.
 */
export function requestPriority(config: Pick<TrainConfig, "async_training">, kind: "train" | "val", step: number): { priority?: number } {
  return kind === "train" && config.async_training.engine_priority ? { priority: -step } : {};
}

/** fully_async: one prompt's group against the engine, and whether it has anything to train on. */
export async function rolloutGroup(
  step: number,
  prompt: Prompt,
  rollout: StepRollout,
  plan: BatchPlan,
  run: { signal: AbortSignal; slots: Semaphore },
): Promise<{ value: RolloutBatch; keep: boolean }> {
  const started = performance.now();
  const { signal } = run;
  const result = await rollout(step, [prompt], run);
  const trajectories = result.trajectories ?? [];
  const selection = selectGroups(trajectories, { n: plan.n, dropEqualRewards: plan.filter.enable, maxGroups: 1 });
  const value: RolloutBatch = {
    kept: selection.kept,
    all: trajectories,
    keptGroups: selection.keptGroups,
    droppedGroups: selection.equalRewardGroups,
    rounds: 1,
    overSampleAborted: result.overSampleAborted + result.overSampleNotStarted,
    loneGroups: selection.loneGroups,
    seconds: (performance.now() - started) / 1000,
    // A group's own share of the engine is not separable from the others' in flight: assembleBatch measures the step's.
    engineBusySeconds: 0,
  };
  return { value, keep: selection.keptGroups > 0 && !signal.aborted };
}

/**
 * fully_async: a step's batch from the groups the buffer handed out (`kept`) and those it discarded since the last
 * step (dropped stale, failed, equal rewards), which go to the rollout file only. `seconds` is the step's share of
 * generation: the wall time since the previous batch was handed out; `engineBusySeconds` the engine's busy time in
 * that window.
 */
export function assembleBatch(kept: readonly RolloutBatch[], discarded: readonly RolloutBatch[], seconds: number, engineBusySeconds = 0): RolloutBatch {
  const batch = emptyBatch(seconds, engineBusySeconds);
  for (const group of kept) {
    batch.kept.push(...group.kept);
    batch.keptGroups += group.keptGroups;
  }
  for (const group of [...kept, ...discarded]) {
    batch.all.push(...group.all);
    batch.droppedGroups += group.droppedGroups;
    batch.overSampleAborted += group.overSampleAborted;
    batch.loneGroups += group.loneGroups;
    batch.rounds += 1;
  }
  return batch;
}
