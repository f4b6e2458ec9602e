/**
 * What the training scheduler drives: a generator of trajectories and a trainer, both injected, so the same schedule
 * code runs `agentrl train` (train/loop.ts), the benchmark's simulated engine (bench/async-training.mjs) and the tests'
 * hand-resolved fakes.
 */
import type { Clock } from "./activity.js";
import type { TrainingMode } from "./modes.js";

/** One prompt's group from the fully async stream; `keep` is false when it has nothing to train on. */
export interface GroupResult<G> {
  value: G;
  keep: boolean;
}

/** Generates with the weights the engine serves when a batch or group starts; stops early when `signal` aborts. */
export interface Generator<B, G> {
  /** The whole batch of `step` (sync and one-step-off). Resolves, possibly partial, once `signal` aborts. */
  batch(step: number, signal: AbortSignal): Promise<B>;
  /** Groups in `batch`, for its staleness statistics. */
  size(batch: B): number;
  /** One prompt's group (fully async); `step` is the step it is generated for. */
  group(step: number, signal: AbortSignal): Promise<GroupResult<G>>;
  /** Step `step`'s batch from the groups the buffer hands out, and those it dropped or that had nothing to train on. */
  assemble(step: number, kept: G[], discarded: G[]): B;
}

export interface Trainer<B> {
  /**
   * The update on `batch`, then, when `sync` is true, the weight sync: afterwards the engine serves the policy of
   * `step`, unless the sync failed (`{ synced: false }`): then it serves the version it had, and the next sync tries
   * again. `sync` is false only between fully_async's syncs (async_training.trigger_parameter_sync_step > 1): the
   * update stays with the trainer, and the result is not read. `waitBeforeSync`, when given, is awaited between the
   * update and the sync (one_step_off without partial rollouts: it resolves once the next batch is complete, so that
   * the batch is generated whole on the weights it started with; the trainer counts as idle meanwhile).
   */
  train(step: number, batch: B, sync: boolean, waitBeforeSync?: () => Promise<void>): Promise<{ synced: boolean } | void>;
  /** The step's records (metrics, rollout file, validation, checkpoint); generation for later steps may run meanwhile. */
  finish(step: number, batch: B, report: StepReport): Promise<void>;
}

export interface StepReport {
  /** Per trained group: policy versions (updates) between the weights it started with and the weights trained on it. */
  staleness: number[];
  /**
   * Per trained group: weight syncs between the weights it started with and the update (verl's parameter versions,
   * what the fully_async bound limits). Equal to `staleness` when every update is synced.
   */
  syncStaleness: number[];
  /** Groups dropped since the last step because their staleness would exceed the bound (fully async). */
  droppedStale: number;
  /** Fractions of the step's wall time (since the previous step's sync) the trainer and the generator were idle. */
  trainerIdle: number;
  generatorIdle: number;
}

export interface FullyAsyncPlan {
  /** Groups a step trains on: data.train_batch_size. */
  groupsPerBatch: number;
  /** async_training.staleness_threshold (batches generation may run ahead). */
  stalenessThreshold: number;
  /**
   * async_training.trigger_parameter_sync_step: updates per weight sync (1 when left out). The bound and admission
   * count syncs, as verl's parameter versions do; a step that `mustSync` says needs the engine current (validation
   * reads it), and the last step, sync whatever the count.
   */
  syncEvery?: number;
  mustSync?: (step: number) => boolean;
  /** Cap on groups generating at once (max_concurrency / n). */
  maxGroupsInFlight: number;
  /**
   * Groups a step may discard (failed, or filtered for equal rewards) before it trains on what it has, fewer than
   * groupsPerBatch; stale drops do not count.
   */
  maxDiscardedPerStep: number;
}

export interface ScheduleOptions<B, G> {
  mode: TrainingMode;
  firstStep: number;
  lastStep: number;
  generator: Generator<B, G>;
  trainer: Trainer<B>;
  /** Ctrl-C: no new step starts; a step whose batch is not ready is forgotten. */
  signal: AbortSignal;
  fullyAsync: FullyAsyncPlan;
  /**
   * async_training.partial_rollout (true when left out). one_step_off with false: each sync waits for the batch
   * generating meanwhile to finish, every turn of it, so that every batch is sampled by one version (the one before
   * the step it lags), whatever the timing, and seeded runs repeat themselves. With true the sync goes ahead and the
   * engine continues what it cut on the new weights.
   */
  partialRollout?: boolean;
  /** Milliseconds, for the idle ratios (performance.now unless a test or the benchmark brings its own). */
  clock?: Clock;
}

export interface ScheduleResult {
  /** Steps trained and finished. */
  steps: number;
  /** The signal stopped the schedule before lastStep. */
  stopped: boolean;
}
