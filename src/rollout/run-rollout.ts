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
import type { Semaphore } from "../tools/index.js";
import { OVER_SAMPLE_FINISH_REASON, OverSampleAbort, overSampleTarget } from "./over-sample.js";

/**
 * Where a run's trajectories execute, bound once to the run's signal (Ctrl-C, over-sampling's abort, the first
 * failure). runRollout's default runs them in this thread with runTrajectory; threads/ runs them in worker threads.
 * The scheduling and the recording around it stay in runRollout either way.
 */
export type TrajectoryExecutor = (runSignal: AbortSignal) => (sample: Sample) => Promise<Trajectory>;

/** Runs every trajectory in this thread, in the given context. */
export function inThisThread(context: Omit<TrajectoryContext, "signal">): TrajectoryExecutor {
  return (signal) => {
    const withSignal = boundContext(context, signal);
    return (sample) => runTrajectory(sample, withSignal);
  };
}

/**
 * The context with the run's signal, every field written out at one allocation site, so every run's context has one
 * hidden class. With a spread (`{ ...context, signal }`), a process that ran many rollouts saw the functions reading
 * the context (most of a turn's) deoptimized once a run ("wrong map" under --trace-deopt) and compiled again: 96–513
 * ms of compiling per run of 1,024 trajectories, 53–173 ms after (docs/benchmarks.md, 2026-11-29).
 */
export function boundContext(context: Omit<TrajectoryContext, "signal">, signal: AbortSignal): TrajectoryContext {
  // Every key, optional ones too: a field added to TrajectoryContext and not written here is a type error.
  const bound: { [K in keyof Required<TrajectoryContext>]: TrajectoryContext[K] | undefined } = {
    model: context.model,
    client: context.client,
    parser: context.parser,
    tools: context.tools,
    toolSchemas: context.toolSchemas,
    interactions: context.interactions,
    rewardFunction: context.rewardFunction,
    rewardKwargs: context.rewardKwargs,
    overlongBuffer: context.overlongBuffer,
    rollout: context.rollout,
    maxPromptLength: context.maxPromptLength,
    maxResponseLength: context.maxResponseLength,
    signal,
    step: context.step,
    greedy: context.greedy,
    priority: context.priority,
    warn: context.warn,
    agentLoops: context.agentLoops,
  };
  return bound as TrajectoryContext;
}

export type RolloutRun = RolloutRunOptions & (
  | { context: Omit<TrajectoryContext, "signal"> }
  | { executor: TrajectoryExecutor }
);

export interface RolloutRunOptions {
  prompts: AsyncIterable<Prompt> | Iterable<Prompt>;
  /** Samples per prompt. */
  n: number;
  /** Trajectories in flight at once (all threads together when they run in worker threads). */
  concurrency: number;
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
  /**
   * Trajectory slots shared with other runs: `agentrl train`'s fully_async mode runs one runRollout per prompt's group
   * and keeps max_concurrency trajectories in flight across all of them.
   */
  slots?: Semaphore;
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
  const rollout = new Rollout(run);
  const onCancel = () => rollout.controller.abort(run.signal?.reason);
  run.signal?.addEventListener("abort", onCancel, { once: true });
  if (run.signal?.aborted) rollout.controller.abort();
  const workers = Array.from({ length: Math.max(1, run.concurrency) }, () => rollout.work().catch((err) => rollout.fail(err)));
  await Promise.all(workers);
  run.signal?.removeEventListener("abort", onCancel);
  if (rollout.failure !== undefined) throw rollout.failure;
  return rollout.result();
}

/** One rollout in progress: the shared sample source, the run-wide signal, and what it has counted so far. */
class Rollout {
  readonly controller = new AbortController();
  failure: unknown;
  private readonly stats = new RolloutStats();
  private readonly kept: Trajectory[] | undefined;
  private readonly execute: (sample: Sample) => Promise<Trajectory>;
  private readonly source: AsyncGenerator<Sample>;
  private readonly counters = { resumedSkipped: 0 };
  private readonly overlongPrompts = new Set<number>();
  private readonly overSampleTarget: number;
  private readonly overSampling: boolean;
  private pulling: Promise<unknown> = Promise.resolve();
  private finished = 0;
  private overlongSamples = 0;
  private cancelledInFlight = 0;
  private overSampleAborted = 0;

  constructor(private readonly run: RolloutRun) {
    this.kept = run.writer ? undefined : [];
    this.execute = ("executor" in run ? run.executor : inThisThread(run.context))(this.controller.signal);
    this.source = samplesOf(run, this.counters);
    this.overSampleTarget = run.overSample ? overSampleTarget(run.overSample.total, run.overSample.rate) : Infinity;
    this.overSampling = this.overSampleTarget < (run.overSample?.total ?? Infinity);
  }

  /** One slot: takes the next sample as soon as its trajectory is recorded, until none is left or the run stops. */
  async work(): Promise<void> {
    while (this.failure === undefined && !this.controller.signal.aborted) {
      const next = await this.nextSample();
      if (next.done) return;
      await this.runAndRecord(next.value);
    }
  }

  /**
   * A frame of its own for the finished trajectory: held in the loop above, it stayed in the suspended slot's saved
   * registers while the slot ran its next trajectory (V8 keeps them), a whole trajectory's record per slot.
   */
  private async runAndRecord(sample: Sample): Promise<void> {
    const trajectory = await this.runSample(sample);
    if (trajectory) await this.record(trajectory);
  }

  /** The first failure stops every slot. */
  fail(err: unknown): void {
    if (this.failure === undefined) this.failure = err;
    this.controller.abort(err);
  }

  result(): RolloutResult {
    return {
      stats: this.stats,
      trajectories: this.kept,
      skippedPrompts: this.overlongPrompts.size,
      resumedSkipped: this.counters.resumedSkipped,
      cancelled: this.run.signal?.aborted ?? false,
      cancelledInFlight: this.cancelledInFlight,
      overSampleAborted: this.overSampleAborted,
      overSampleNotStarted: this.overSampling && this.controller.signal.reason instanceof OverSampleAbort
        ? Math.max(0, this.run.overSample!.total - this.finished - this.overSampleAborted - this.cancelledInFlight - this.overlongSamples)
        : 0,
    };
  }

  /** The sample source is shared by all slots; pulls are serialised so each sample is taken exactly once. */
  private nextSample(): Promise<IteratorResult<Sample>> {
    const next = this.pulling.then(() => this.source.next());
    this.pulling = next.catch(() => undefined);
    return next;
  }

  /** The sample's trajectory; undefined when its prompt is skipped as too long (filter_overlong_prompts). */
  private async runSample(sample: Sample): Promise<Trajectory | undefined> {
    if (this.overlongPrompts.has(sample.dataIndex)) {
      this.overlongSamples += 1;
      return undefined;
    }
    // A sample still waiting for a shared slot when the run stops never started: like one never pulled, it is redone.
    const release = this.run.slots ? await this.run.slots.acquire(this.controller.signal).catch(() => undefined) : () => undefined;
    if (!release) return undefined;
    this.run.onStart?.(sample);
    try {
      return await this.execute(sample);
    } catch (err) {
      if (!(err instanceof PromptTooLongError)) throw err;
      if (!this.run.filterOverlongPrompts) {
        throw new InputError(err.message, { hint: "raise data.max_prompt_length, or set data.filter_overlong_prompts: true" });
      }
      this.overlongPrompts.add(sample.dataIndex);
      this.overlongSamples += 1;
      return undefined;
    } finally {
      release();
    }
  }

  /** Counts, writes (or keeps) and reports a finished trajectory; starts over-sampling's abort once enough are done. */
  private async record(trajectory: Trajectory): Promise<void> {
    // A trajectory cut short by Ctrl-C is not a result: it is left off the file so --resume runs it again.
    if (trajectory.finish_reason === "cancelled") {
      this.cancelledInFlight += 1;
      return;
    }
    if (this.overSampling && this.finished >= this.overSampleTarget && trajectory.finish_reason !== OVER_SAMPLE_FINISH_REASON) {
      // It was still running when the target was reached (its answer handed over in the same turn of the event loop as
      // the one that reached it, src/engine/hand-over.ts, or it ran in another rollout thread): over-sampled like the
      // rest, as verl cancels every request not done at that moment, so a batch keeps exactly the target.
      trajectory = { ...trajectory, status: "aborted", finish_reason: OVER_SAMPLE_FINISH_REASON };
    }
    if (trajectory.finish_reason === OVER_SAMPLE_FINISH_REASON) this.overSampleAborted += 1;
    else this.finished += 1;
    if (this.overSampling && this.finished >= this.overSampleTarget && !this.controller.signal.aborted) {
      this.controller.abort(new OverSampleAbort(this.finished, this.run.overSample!.total));
    }
    this.stats.add(trajectory);
    if (this.run.writer) await this.run.writer.write(trajectory);
    else this.kept!.push(trajectory);
    this.run.onTrajectory?.(trajectory, this.stats);
  }
}
