/**
 * The training scheduler (src/train/schedule) with a fake generator and trainer whose every call is a promise the
 * test resolves by hand: which calls are outstanding at each point is the whole observable, so nothing here depends
 * on wall-clock time. Covers: sync keeps generation and training apart; one_step_off generates step k+1 while step k
 * trains; fully_async never trains a group past its staleness bound, drops and counts those that would be, and trains
 * no group twice.
 */
import { describe, expect, it } from "vitest";
import { runSchedule, type ScheduleOptions, type StepReport, type TrainingMode } from "../src/train/schedule/index.js";
import { seededRandom } from "../src/data/random.js";

/** A call the test resolves by hand. */
interface Call<T> {
  kind: "batch" | "group" | "train";
  step: number;
  id: number;
  signal: AbortSignal | undefined;
  resolve(value: T): void;
  onAbort?: () => void;
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Batches are lists of group ids; groups are ids. Every call stays open until the test resolves it. */
class Harness {
  readonly open: Call<unknown>[] = [];
  readonly log: string[] = [];
  readonly reports = new Map<number, StepReport>();
  readonly trained = new Map<number, number[]>();
  /** Per step, whether the schedule asked its update to be synced. */
  readonly synced = new Map<number, boolean>();
  /** Per step, what the schedule gave its sync to wait for (one_step_off without partial rollouts). */
  readonly waits = new Map<number, (() => Promise<void>) | undefined>();
  private nextId = 0;
  /** Resolve training at once (the fully async checks drive generation only). */
  autoTrain = false;

  options(mode: TrainingMode, steps: number, signal = new AbortController().signal, plan: Partial<ScheduleOptions<number[], number>["fullyAsync"]> = {}): ScheduleOptions<number[], number> {
    return {
      mode, firstStep: 1, lastStep: steps, signal,
      fullyAsync: { groupsPerBatch: 2, stalenessThreshold: 1, maxGroupsInFlight: 100, maxDiscardedPerStep: 100, ...plan },
      generator: {
        batch: (step, s) => this.call<number[]>("batch", step, s),
        size: (batch) => batch.length,
        group: (step, s) => this.call<number>("group", step, s).then((id) => ({ value: id, keep: id >= 0 })),
        assemble: (_step, kept) => kept,
      },
      trainer: {
        train: async (step, batch, sync, waitBeforeSync) => {
          this.trained.set(step, batch);
          this.synced.set(step, sync);
          this.waits.set(step, waitBeforeSync);
          if (!this.autoTrain) await this.call<void>("train", step, undefined);
          this.log.push(`trained ${step}`);
        },
        finish: async (step, _batch, report) => {
          this.reports.set(step, report);
        },
      },
    };
  }

  private call<T>(kind: Call<T>["kind"], step: number, signal: AbortSignal | undefined): Promise<T> {
    this.log.push(`${kind} ${step} start`);
    return new Promise<T>((resolve) => {
      const call: Call<T> = { kind, step, id: this.nextId++, signal, resolve };
      this.open.push(call as Call<unknown>);
      // An aborted generation settles at once, as runRollout does (its trajectories end as aborted).
      call.onAbort = () => this.settle(call, (kind === "batch" ? [] : -1) as T);
      signal?.addEventListener("abort", call.onAbort, { once: true });
    });
  }

  settle<T>(call: Call<T>, value: T): void {
    const i = this.open.indexOf(call as Call<unknown>);
    if (i < 0) return;
    this.open.splice(i, 1);
    if (call.onAbort) call.signal?.removeEventListener("abort", call.onAbort);
    call.resolve(value);
  }

  pending(kind: Call<unknown>["kind"]): Call<unknown>[] {
    return this.open.filter((c) => c.kind === kind);
  }

  /** Resolves the one open call of `kind` (for `step`, when given). */
  resolveOne(kind: Call<unknown>["kind"], value: unknown, step?: number): void {
    const calls = this.pending(kind).filter((c) => step === undefined || c.step === step);
    expect(calls).toHaveLength(1);
    this.settle(calls[0]!, value);
  }
}

/**
 * Settles the open groups in a seeded random order, ids counting from 0, until the schedule ends. Training resolves
 * at once (autoTrain), so a schedule with nothing generating for 100 turns of the event loop is stuck.
 */
async function drive(h: Harness, done: Promise<unknown>, seed: number): Promise<void> {
  const random = seededRandom(seed);
  const finished = { value: false };
  // The caller awaits `done` itself: a rejection is its to report, not an unhandled one here.
  done.then(() => (finished.value = true), () => (finished.value = true));
  let id = 0;
  let idle = 0;
  while (!finished.value) {
    await flush();
    const open = h.pending("group");
    if (open.length > 0) h.settle(open[Math.floor(random() * open.length)]!, id++);
    idle = open.length > 0 ? 0 : idle + 1;
    if (idle > 100) throw new Error("the schedule waits with no group generating");
  }
}

describe("sync", () => {
  it("generates the next batch only after the step is trained, synced and recorded, with staleness 0", async () => {
    const h = new Harness();
    const done = runSchedule(h.options("sync", 2));
    await flush();
    h.resolveOne("batch", [10, 11], 1);
    await flush();
    expect(h.pending("batch")).toHaveLength(0); // no generation while step 1 trains
    h.resolveOne("train", undefined, 1);
    await flush();
    h.resolveOne("batch", [12, 13], 2);
    await flush();
    h.resolveOne("train", undefined, 2);
    expect(await done).toEqual({ steps: 2, stopped: false });
    expect(h.log).toEqual(["batch 1 start", "train 1 start", "trained 1", "batch 2 start", "train 2 start", "trained 2"]);
    expect(h.reports.get(2)!.staleness).toEqual([0, 0]);
    expect(h.reports.get(2)!.droppedStale).toBe(0);
  });

  it("forgets a step whose batch was still generating at Ctrl-C", async () => {
    const h = new Harness();
    const stop = new AbortController();
    const done = runSchedule(h.options("sync", 3, stop.signal));
    await flush();
    stop.abort();
    expect(await done).toEqual({ steps: 0, stopped: true });
    expect(h.trained.size).toBe(0);
  });
});

describe("one_step_off", () => {
  it("starts generating step k+1 before the update of step k ends, and trains it one version stale", async () => {
    const h = new Harness();
    const done = runSchedule(h.options("one_step_off", 3));
    await flush();
    h.resolveOne("batch", [1, 2], 1);
    await flush();
    // Step 1 is training and step 2 generating, both still open.
    expect(h.pending("train").map((c) => c.step)).toEqual([1]);
    expect(h.pending("batch").map((c) => c.step)).toEqual([2]);
    h.resolveOne("train", undefined, 1);
    await flush();
    h.resolveOne("batch", [3, 4], 2);
    await flush();
    expect(h.pending("batch").map((c) => c.step)).toEqual([3]);
    h.resolveOne("train", undefined, 2);
    await flush();
    h.resolveOne("batch", [5, 6], 3);
    await flush();
    expect(h.pending("batch")).toHaveLength(0); // nothing generated past the last step
    h.resolveOne("train", undefined, 3);
    expect(await done).toEqual({ steps: 3, stopped: false });
    expect([1, 2, 3].map((s) => h.reports.get(s)!.staleness)).toEqual([[0, 0], [1, 1], [1, 1]]);
    expect(h.log.indexOf("batch 2 start")).toBeLessThan(h.log.indexOf("trained 1"));
    // With partial rollouts (the default) no sync waits: the engine continues what the sync cuts.
    expect([...h.waits.values()]).toEqual([undefined, undefined, undefined]);
  });

  it("without partial rollouts, step k's sync waits for batch k+1, generated whole on the weights it started with", async () => {
    const h = new Harness();
    const done = runSchedule({ ...h.options("one_step_off", 3), partialRollout: false });
    await flush();
    h.resolveOne("batch", [1, 2], 1);
    await flush();
    let settled = false;
    void h.waits.get(1)!().then(() => (settled = true));
    await flush();
    expect(settled).toBe(false); // batch 2 is generating: step 1's sync must not start
    h.resolveOne("batch", [3, 4], 2);
    await flush();
    expect(settled).toBe(true);
    h.resolveOne("train", undefined, 1);
    await flush();
    h.resolveOne("batch", [5, 6], 3);
    await flush();
    h.resolveOne("train", undefined, 2);
    await flush();
    h.resolveOne("train", undefined, 3);
    expect(await done).toEqual({ steps: 3, stopped: false });
    expect(h.waits.get(2)).toBeInstanceOf(Function);
    expect(h.waits.get(3)).toBeUndefined(); // nothing generates after the last step
    expect([1, 2, 3].map((s) => h.reports.get(s)!.staleness)).toEqual([[0, 0], [1, 1], [1, 1]]);
  });

  it("without partial rollouts, a next batch that fails ends the wait: the step syncs, and the failure is the schedule's", async () => {
    const h = new Harness();
    const options: ScheduleOptions<number[], number> = { ...h.options("one_step_off", 2), partialRollout: false };
    const batch = options.generator.batch;
    options.generator.batch = (step, signal) => (step === 2 ? Promise.reject(new Error("generation failed")) : batch(step, signal));
    const train = options.trainer.train;
    let waited: "open" | "ended" = "open";
    options.trainer.train = async (step, b, sync, waitBeforeSync) => {
      await waitBeforeSync?.();
      waited = "ended";
      return train(step, b, sync);
    };
    const done = runSchedule(options);
    await flush();
    h.resolveOne("batch", [1, 2], 1);
    await flush();
    expect(waited).toBe("ended");
    h.resolveOne("train", undefined, 1);
    await expect(done).rejects.toThrow("generation failed");
    expect(h.log).toContain("trained 1");
  });

  it("a failed sync leaves the engine on the old version: the next batches count their true lag", async () => {
    const h = new Harness();
    const options = h.options("one_step_off", 3);
    const train = options.trainer.train;
    // Step 1's update trains, but its sync fails: the engine keeps serving version 0.
    options.trainer.train = async (step, batch) => {
      await train(step, batch);
      return { synced: step !== 1 };
    };
    const done = runSchedule(options);
    await flush();
    h.resolveOne("batch", [1, 2], 1);
    await flush();
    h.resolveOne("train", undefined, 1);
    await flush();
    h.resolveOne("batch", [3, 4], 2); // started on version 0, while step 1 trained
    await flush();
    h.resolveOne("train", undefined, 2);
    await flush();
    h.resolveOne("batch", [5, 6], 3); // started on version 0 too: step 1's sync failed, step 2's not yet done
    await flush();
    h.resolveOne("train", undefined, 3);
    expect(await done).toEqual({ steps: 3, stopped: false });
    expect([1, 2, 3].map((s) => h.reports.get(s)!.staleness)).toEqual([[0, 0], [1, 1], [2, 2]]);
  });

  it("cancels the batch generated ahead on Ctrl-C and waits for it before returning", async () => {
    const h = new Harness();
    const stop = new AbortController();
    const done = runSchedule(h.options("one_step_off", 3, stop.signal));
    await flush();
    h.resolveOne("batch", [1, 2], 1);
    await flush();
    const ahead = h.pending("batch")[0]!;
    stop.abort();
    h.resolveOne("train", undefined, 1);
    expect(await done).toEqual({ steps: 1, stopped: true });
    expect(ahead.signal!.aborted).toBe(true);
    expect(h.open).toHaveLength(0);
    expect([...h.trained.keys()]).toEqual([1]);
  });
});

describe("fully_async", () => {
  it("with staleness_threshold 0 starts no group for step 2 before step 1 is synced", async () => {
    const h = new Harness();
    const done = runSchedule(h.options("fully_async", 2, undefined, { stalenessThreshold: 0 }));
    await flush();
    expect(h.pending("group")).toHaveLength(2);
    for (const id of [100, 101]) h.settle(h.pending("group")[0]!, id);
    await flush();
    expect(h.pending("group")).toHaveLength(0);
    h.resolveOne("train", undefined, 1);
    await flush();
    expect(h.pending("group")).toHaveLength(2);
    for (const id of [102, 103]) h.settle(h.pending("group")[0]!, id);
    await flush();
    h.resolveOne("train", undefined, 2);
    await done;
    expect(h.trained.get(1)).toEqual([100, 101]);
    expect(h.trained.get(2)).toEqual([102, 103]);
    expect(h.reports.get(2)!.staleness).toEqual([0, 0]);
  });

  it("drops a group that would train past the bound, counts it, and refills its place", async () => {
    const h = new Harness();
    h.autoTrain = true;
    const done = runSchedule(h.options("fully_async", 3, undefined, { stalenessThreshold: 1 }));
    await flush();
    // Four groups start with version 0 (one batch ahead). The first one is slow.
    const [slow, ...rest] = h.pending("group");
    expect(rest).toHaveLength(3);
    rest.forEach((c, i) => h.settle(c, 10 + i)); // steps 1 and 2 can train without it
    await flush();
    for (let i = 0; h.trained.size < 2; i++) {
      h.settle(h.pending("group").find((c) => c !== slow)!, 20 + i);
      await flush();
    }
    // Started at version 0, it would train at staleness 2 > 1: it was aborted when step 2 took its batch without it,
    // so this late answer changes nothing.
    h.settle(slow, 99);
    await flush();
    while (h.trained.size < 3) {
      h.settle(h.pending("group")[0]!, 30 + h.trained.size);
      await flush();
    }
    await done;
    const trained = [...h.trained.values()].flat();
    expect(trained).not.toContain(99);
    expect(h.reports.get(3)!.droppedStale).toBe(1);
    expect(Math.max(...[...h.reports.values()].flatMap((r) => r.staleness))).toBeLessThanOrEqual(1);
  });

  it("aborts a group still generating once the step that was its last chance is handed out, and starts another", async () => {
    const h = new Harness();
    h.autoTrain = true;
    const done = runSchedule(h.options("fully_async", 3, undefined, { stalenessThreshold: 1 }));
    await flush();
    // Four groups start with version 0; the first is slow. Step 1 trains two of the others.
    const [slow, ...rest] = h.pending("group");
    h.settle(rest[0]!, 10);
    h.settle(rest[1]!, 11);
    await flush();
    expect(h.trained.get(1)).toEqual([10, 11]);
    expect(slow!.signal!.aborted).toBe(false); // step 2 would train it 1 version stale: still within the bound
    const startedBefore = h.log.filter((line) => line.startsWith("group")).length;
    // Step 2 takes the third version-0 group and a version-1 one, not the slow one: from step 3 on it would lag 2.
    h.settle(rest[2]!, 12);
    h.settle(h.pending("group").find((c) => c !== slow)!, 20);
    await flush();
    expect(h.trained.get(2)).toEqual([12, 20]);
    expect(slow!.signal!.aborted).toBe(true);
    expect(h.pending("group")).not.toContain(slow);
    // Its place went to a new prompt at once (with step 2's own refill).
    expect(h.log.filter((line) => line.startsWith("group")).length).toBeGreaterThan(startedBefore + 2);
    while (h.trained.size < 3) {
      h.settle(h.pending("group")[0]!, 30 + h.trained.size);
      await flush();
    }
    await done;
    expect(h.reports.get(3)!.droppedStale).toBe(1);
    expect(Math.max(...[...h.reports.values()].flatMap((r) => r.staleness))).toBeLessThanOrEqual(1);
  });

  it("trains the buffer's oldest groups first", async () => {
    const h = new Harness();
    const done = runSchedule(h.options("fully_async", 2, undefined, { stalenessThreshold: 2 }));
    await flush();
    const v0 = h.pending("group"); // six groups started with version 0 (two batches ahead)
    expect(v0).toHaveLength(6);
    h.settle(v0[0]!, 1);
    h.settle(v0[1]!, 2);
    await flush();
    h.resolveOne("train", undefined, 1);
    await flush();
    const v1 = h.pending("group").filter((c) => !v0.includes(c));
    expect(v1).toHaveLength(2);
    // A version-1 group finishes first, then two version-0 ones, before step 2 looks at the buffer.
    h.settle(v1[0]!, 10);
    h.settle(v0[2]!, 3);
    h.settle(v0[3]!, 4);
    await flush();
    h.resolveOne("train", undefined, 2);
    await done;
    expect(h.trained.get(2)).toEqual([3, 4]);
    expect(h.reports.get(2)!.staleness).toEqual([1, 1]);
  });

  it.each([0, 0.5, 1, 2])("never trains past ceil(staleness_threshold = %s), nor a group twice, whatever the finishing order", async (threshold) => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const h = new Harness();
      h.autoTrain = true;
      const steps = 12;
      const done = runSchedule(h.options("fully_async", steps, undefined, { groupsPerBatch: 3, stalenessThreshold: threshold }));
      await drive(h, done, seed);
      expect(await done).toEqual({ steps, stopped: false });
      const trained = [...h.trained.values()].flat();
      expect(new Set(trained).size).toBe(trained.length);
      expect(trained).toHaveLength(steps * 3);
      const staleness = [...h.reports.values()].flatMap((r) => r.staleness);
      expect(Math.max(...staleness)).toBeLessThanOrEqual(Math.ceil(threshold));
      expect(Math.min(...staleness)).toBeGreaterThanOrEqual(0);
      const dropped = [...h.reports.values()].reduce((s, r) => s + r.droppedStale, 0);
      // Every group started is trained, dropped stale (some while still generating), or cancelled at the end.
      const started = h.log.filter((line) => line.startsWith("group")).length;
      expect(trained.length + dropped).toBeLessThanOrEqual(started);
    }
  });

  it("stops generating once the last step has its groups, before that step trains", async () => {
    const h = new Harness();
    const done = runSchedule(h.options("fully_async", 1, undefined, { stalenessThreshold: 1 }));
    await flush();
    const started = h.pending("group");
    expect(started).toHaveLength(4); // the step's 2 groups and 1 × 2 ahead
    h.settle(started[0]!, 1);
    h.settle(started[1]!, 2);
    await flush();
    expect(h.pending("train")).toHaveLength(1);
    expect(started.slice(2).map((c) => c.signal!.aborted)).toEqual([true, true]);
    expect(h.pending("group")).toHaveLength(0);
    h.resolveOne("train", undefined, 1);
    await done;
    expect(h.trained.get(1)).toEqual([1, 2]);
  });

  it("trains on fewer groups rather than wait forever when groups keep having nothing to train on", async () => {
    const h = new Harness();
    h.autoTrain = true;
    const done = runSchedule(h.options("fully_async", 1, undefined, { maxDiscardedPerStep: 3 }));
    for (let i = 0; i < 3; i++) {
      await flush();
      h.settle(h.pending("group")[0]!, -1); // keep: false
    }
    await done;
    expect(h.trained.get(1)).toEqual([]);
  });
});

describe("fully_async with trigger_parameter_sync_step", () => {
  it("syncs every k-th update, at a step the caller needs synced, and after the last", async () => {
    const h = new Harness();
    h.autoTrain = true;
    const done = runSchedule(h.options("fully_async", 7, undefined, { syncEvery: 3, mustSync: (step) => step === 5 }));
    await drive(h, done, 1);
    expect(await done).toEqual({ steps: 7, stopped: false });
    expect([...h.synced.entries()]).toEqual([[1, false], [2, false], [3, true], [4, false], [5, true], [6, true], [7, true]]);
  });

  it("admits k × (1 + staleness_threshold) batches from each sync, not from each update", async () => {
    const h = new Harness();
    const done = runSchedule(h.options("fully_async", 4, undefined, { syncEvery: 2, stalenessThreshold: 0 }));
    await flush();
    const first = h.pending("group");
    expect(first).toHaveLength(4); // two updates of 2 groups until the first sync
    first.slice(0, 2).forEach((c, i) => h.settle(c, i));
    await flush();
    h.resolveOne("train", undefined, 1);
    await flush();
    expect(h.pending("group")).toHaveLength(2); // step 1 was not synced: nothing new starts
    first.slice(2).forEach((c, i) => h.settle(c, 2 + i));
    await flush();
    h.resolveOne("train", undefined, 2);
    await flush();
    expect(h.pending("group")).toHaveLength(4); // synced: the next version's groups start
    for (const c of h.pending("group")) h.settle(c, 10 + c.id);
    await flush();
    h.resolveOne("train", undefined, 3);
    await flush();
    h.resolveOne("train", undefined, 4);
    await done;
    expect([...h.reports.values()].flatMap((r) => r.syncStaleness)).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect([...h.reports.values()].flatMap((r) => r.staleness)).toEqual([0, 0, 1, 1, 0, 0, 1, 1]);
  });

  it("keeps a slow group through the updates of its last version, and drops it at the sync after", async () => {
    for (const lateBy of [3, 4]) {
      const h = new Harness();
      h.autoTrain = true;
      const done = runSchedule(h.options("fully_async", 6, undefined, { syncEvery: 2, stalenessThreshold: 1 }));
      await flush();
      const slow = h.pending("group")[0]!; // started on the first weights (0 syncs)
      let id = 100;
      // Steps 1..lateBy − 1 train without it. Syncs after steps 2 and 4: trained in step 3 or 4 it lags 1 sync.
      while (h.trained.size < lateBy - 1) {
        h.settle(h.pending("group").find((c) => c !== slow)!, id++);
        await flush();
      }
      h.settle(slow, 1);
      await flush();
      while (h.trained.size < 6) {
        const open = h.pending("group").filter((c) => c !== slow);
        if (open.length > 0) h.settle(open[0]!, id++);
        await flush();
      }
      await done;
      const step = [...h.trained.entries()].find(([, groups]) => groups.includes(1))?.[0];
      expect(step).toBe(lateBy);
      expect(h.reports.get(lateBy)!.syncStaleness).toContain(1);
      expect(h.reports.get(lateBy)!.staleness).toContain(lateBy - 1);
    }
    // Not finished by the hand-out of step 4, the last update on that version: aborted, dropped, never trained.
    const h = new Harness();
    h.autoTrain = true;
    const done = runSchedule(h.options("fully_async", 6, undefined, { syncEvery: 2, stalenessThreshold: 1 }));
    await flush();
    const slow = h.pending("group")[0]!;
    let id = 100;
    while (h.trained.size < 4) {
      expect(slow.signal!.aborted).toBe(false);
      h.settle(h.pending("group").find((c) => c !== slow)!, id++);
      await flush();
    }
    expect(slow.signal!.aborted).toBe(true);
    await drive(h, done, 2);
    expect([...h.reports.values()].reduce((n, r) => n + r.droppedStale, 0)).toBe(1);
  });

  it.each([
    [2, 0.5],
    [2, 1],
    [3, 1],
    [4, 2],
  ])("with k = %s never trains past ceil(staleness_threshold = %s) syncs, nor a group twice, whatever the finishing order", async (k, threshold) => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const h = new Harness();
      h.autoTrain = true;
      const steps = 13;
      const done = runSchedule(h.options("fully_async", steps, undefined, { groupsPerBatch: 3, stalenessThreshold: threshold, syncEvery: k }));
      await drive(h, done, seed);
      expect(await done).toEqual({ steps, stopped: false });
      const trained = [...h.trained.values()].flat();
      expect(new Set(trained).size).toBe(trained.length);
      expect(trained).toHaveLength(steps * 3);
      const reports = [...h.reports.values()];
      const bound = Math.ceil(threshold);
      expect(Math.max(...reports.flatMap((r) => r.syncStaleness))).toBeLessThanOrEqual(bound);
      expect(Math.max(...reports.flatMap((r) => r.staleness))).toBeLessThanOrEqual(k * (bound + 1) - 1);
      expect(Math.min(...reports.flatMap((r) => r.staleness))).toBeGreaterThanOrEqual(0);
    }
  });
});
