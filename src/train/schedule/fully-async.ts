/**
 * fully_async: prompts' groups are generated continuously and land in a buffer as they finish; each step trains on
 * the first train_batch_size ready groups while generation goes on. Two rules bound how old a trained group can be:
 * - admission (verl's staleness_threshold, AReaL's capacity control): groups started, not counting those dropped, stay
 *   ≤ (steps trained + 1 + staleness_threshold) × train_batch_size, so generation runs at most that far ahead;
 * - the bound: a group whose staleness would exceed ceil(staleness_threshold) is dropped and counted, and a new prompt
 *   takes its place. A slow group started long ago is the one that gets dropped, never trained stale. One still
 *   generating is aborted as soon as the trainer passes its bound: every token it would still cost the engine is
 *   thrown away, and its slots go to a group that can still be trained.
 * Each step takes the buffer's oldest groups (by the version they started with) first: the ones closest to the bound.
 *
 * With async_training.trigger_parameter_sync_step = k > 1 (verl's local updates), the trainer updates on each batch as
 * it is ready but syncs the weights only every k updates: both rules count syncs (verl's parameter versions), so a
 * version is k batches, as one batch of k × train_batch_size is in sync mode with k mini-batches.
 */
import { onAbort } from "../../signal-fanout.js";
import { maxStaleness } from "./modes.js";
import type { ScheduleContext } from "./schedule.js";
import type { FullyAsyncPlan, Generator, ScheduleOptions, ScheduleResult } from "./types.js";

interface Buffered<G> {
  value: G;
  /** The version served when the group started. */
  version: number;
  /** The syncs the engine's weights had when the group started (ScheduleContext.servedSyncs). */
  syncs: number;
}

interface Running {
  /** The version served when the group started. */
  version: number;
  syncs: number;
  /** Aborts this group alone: the trainer passed its bound while it was generating. */
  controller: AbortController;
  doomed: boolean;
}

interface Taken<G> {
  kept: Buffered<G>[];
  discarded: G[];
  droppedStale: number;
}

export async function runFullyAsync<B, G>(options: ScheduleOptions<B, G>, context: ScheduleContext<B>): Promise<ScheduleResult> {
  const syncAfter = syncSteps(options);
  const stream = new GroupStream(options.generator, options.fullyAsync, context, syncAfter);
  let steps = 0;
  try {
    for (let step = options.firstStep; step <= options.lastStep; step++) {
      const taken = await stream.take(step, step === options.lastStep);
      if (!taken) return { steps, stopped: true };
      // Nothing generated from here on would be trained: the engine's time goes to the last update instead.
      if (step === options.lastStep) await stream.close();
      const batch = options.generator.assemble(step, taken.kept.map((g) => g.value), taken.discarded);
      // Counted from the policy the update starts from (step − 1), which a failed sync may have kept from the engine.
      const staleness = taken.kept.map((g) => step - 1 - g.version);
      const syncStaleness = taken.kept.map((g) => context.syncs - g.syncs);
      const report = await context.train(step, batch, { staleness, syncStaleness, droppedStale: taken.droppedStale }, syncAfter(step));
      if (step < options.lastStep) stream.trained(step + 1);
      await options.trainer.finish(step, batch, report);
      steps += 1;
      if (options.signal.aborted) return { steps, stopped: step < options.lastStep };
    }
    return { steps, stopped: false };
  } finally {
    await stream.close();
  }
}

/**
 * Which steps end with a weight sync: every trigger_parameter_sync_step-th from the first, the last, and any the
 * caller needs the engine current after.
 */
function syncSteps(options: Pick<ScheduleOptions<unknown, unknown>, "firstStep" | "lastStep" | "fullyAsync">): (step: number) => boolean {
  const every = options.fullyAsync.syncEvery ?? 1;
  const must = options.fullyAsync.mustSync;
  return (step) => (step - options.firstStep + 1) % every === 0 || step === options.lastStep || (must?.(step) ?? false);
}

/** The generation side: groups in flight, the buffer of finished ones, and the admission and staleness rules. */
class GroupStream<B, G> {
  private readonly inFlight = new Map<Promise<void>, Running>();
  /** Groups started and not dropped: trained + buffered + in flight. */
  private admitted = 0;
  private stepsTrained = 0;
  /** stepsTrained at the last sync: admission moves on at syncs. */
  private stepsSynced = 0;
  private step = 0;
  private readonly buffer: Buffered<G>[] = [];
  private discarded: G[] = [];
  private droppedStale = 0;
  private failure: { error: unknown } | undefined;
  private wake: (() => void) | undefined;
  private readonly bound: number;

  constructor(
    private readonly generator: Generator<B, G>,
    private readonly plan: FullyAsyncPlan,
    private readonly context: ScheduleContext<B>,
    private readonly syncAfter: (step: number) => boolean,
  ) {
    this.bound = maxStaleness("fully_async", plan.stalenessThreshold);
    context.cancel.signal.addEventListener("abort", () => this.notify(), { once: true });
  }

  /** Step `step`'s groups, once train_batch_size are ready; null when the run is stopping. */
  async take(step: number, last: boolean): Promise<Taken<G> | null> {
    this.step = step;
    for (;;) {
      this.dropStale(step);
      if (this.failure) throw this.failure.error;
      if (this.context.cancel.signal.aborted) return null;
      this.admit();
      if (this.buffer.length >= this.plan.groupsPerBatch || this.discardedTooMany()) return this.hand(last);
      if (this.inFlight.size === 0) throw new Error("internal: the fully async buffer waits with nothing generating");
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /** The trainer updated on step `next − 1`; if it synced, one more version's worth of groups may start. */
  trained(next: number): void {
    this.stepsTrained += 1;
    if (this.syncAfter(next - 1)) this.stepsSynced = this.stepsTrained;
    this.step = next;
    this.admit();
  }

  async close(): Promise<void> {
    this.context.cancel.abort();
    await Promise.allSettled([...this.inFlight.keys()]);
  }

  private allowance(): number {
    const perVersion = this.plan.syncEvery ?? 1;
    // The epsilon keeps a threshold like 0.1 × 10 groups from rounding down to 0 in floating point.
    return Math.floor((this.stepsSynced + perVersion * (1 + this.plan.stalenessThreshold)) * this.plan.groupsPerBatch + 1e-9);
  }

  private admit(): void {
    while (
      !this.context.cancel.signal.aborted &&
      this.failure === undefined &&
      this.inFlight.size < this.plan.maxGroupsInFlight &&
      this.admitted < this.allowance()
    ) {
      this.launch();
    }
  }

  private launch(): void {
    this.admitted += 1;
    const running: Running = { version: this.context.served, syncs: this.context.servedSyncs, controller: new AbortController(), doomed: false };
    // Every group in flight hears the run's cancel through the fan-out, as every trajectory does (signal-fanout.ts).
    const unsubscribe = onAbort(this.context.cancel.signal, (reason) => running.controller.abort(reason));
    const signal = running.controller.signal;
    this.context.generating.begin();
    const run: Promise<void> = this.generator
      .group(this.step, signal)
      .then(
        (result) => {
          if (running.doomed) this.dropped(result.value);
          else if (result.keep && !signal.aborted) this.buffer.push({ value: result.value, version: running.version, syncs: running.syncs });
          else this.discard(result.value);
        },
        (error: unknown) => {
          this.failure ??= { error };
        },
      )
      .finally(() => {
        unsubscribe();
        this.context.generating.end();
        this.inFlight.delete(run);
        this.admit();
        this.notify();
      });
    this.inFlight.set(run, running);
  }

  /** A group started on weights with `syncs` syncs, trained at `step` or later, would lag past the bound. */
  private tooStale(syncs: number, step: number): boolean {
    return this.syncsBefore(step) - syncs > this.bound;
  }

  /** The trainer's syncs when step `step` (the one being taken, or the next) starts its update. */
  private syncsBefore(step: number): number {
    return this.context.syncs + (step > this.step && this.syncAfter(this.step) ? 1 : 0);
  }

  /** Groups still generating that could no longer be trained within the bound from `step` on stop now. */
  private abortDoomed(step: number): void {
    for (const running of this.inFlight.values()) {
      if (running.doomed || !this.tooStale(running.syncs, step)) continue;
      running.doomed = true;
      running.controller.abort(new Error("past the staleness bound"));
    }
  }

  /** Buffered groups that would train past the bound from `step` on leave; their places go to new prompts. */
  private dropStale(step: number): void {
    for (let i = this.buffer.length - 1; i >= 0; i--) {
      const group = this.buffer[i]!;
      if (!this.tooStale(group.syncs, step)) continue;
      this.buffer.splice(i, 1);
      this.dropped(group.value);
    }
  }

  private dropped(value: G): void {
    this.droppedStale += 1;
    this.discard(value);
  }

  private discard(value: G): void {
    this.admitted -= 1;
    this.discarded.push(value);
  }

  /**
   * A step whose groups keep failing or being filtered trains on what it has rather than wait forever (the sync
   * loop's max_num_gen_batches rounds, in groups).
   */
  private discardedTooMany(): boolean {
    return this.discarded.length - this.droppedStale >= this.plan.maxDiscardedPerStep;
  }

  private hand(last: boolean): Taken<G> {
    // Stable: groups of one version stay in the order they finished.
    this.buffer.sort((a, b) => a.version - b.version);
    const taken = { kept: this.buffer.splice(0, this.plan.groupsPerBatch), discarded: this.discarded, droppedStale: this.droppedStale };
    this.discarded = [];
    this.droppedStale = 0;
    // What missed this step has missed its last chance if it lags past the bound from the next step on: it goes now,
    // not at the next step's take, so new prompts get its place (and the engine its slots) a whole update sooner.
    // After the last step nothing more is trained: close() stops everything instead.
    if (!last) {
      this.dropStale(this.step + 1);
      this.abortDoomed(this.step + 1);
      this.admit();
    }
    return taken;
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
