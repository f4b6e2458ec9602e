#!/usr/bin/env node
/**
 * Asynchronous training: samples trained per second by sync, one_step_off and fully_async, side by side. The real
 * scheduler (dist/train/schedule, what `agentrl train` runs) drives a simulated engine and trainer in virtual time
 * (bench/lib/virtual-time.mjs): exact, seeded, and hours of training in a few seconds. Prints one markdown section.
 *
 *   npx tsc -p tsconfig.json && node bench/async-training.mjs
 *   BENCH_QUICK=1 node bench/async-training.mjs   # 2 seeds
 */
import { runSchedule } from "../dist/train/schedule/index.js";
import { Semaphore } from "../dist/tools/index.js";
import { fmt, median, pct, range } from "./lib/table-format.mjs";
import { drawTrajectories, lognormal, pareto } from "./lib/serving-sim.mjs";
import { VirtualTime } from "./lib/virtual-time.mjs";

const quick = process.env.BENCH_QUICK === "1";
const SEEDS = Array.from({ length: quick ? 2 : 5 }, (_, i) => 7000 + i);
const STEPS = 20;
const GROUPS = 32; // data.train_batch_size
const N = 8; // rollout.n
const MAX_CONCURRENCY = 256; // rollout.max_concurrency: trajectories in flight
const CAPACITY = 128; // sequences the engine decodes at once
const STEP_MS = 30; // one decode step: each running sequence gains one token (33 tokens/s per sequence)
const TOOL_TIMEOUT_MS = 30_000;
/** Share of a synchronous step spent generating; the trainer's cost per token is set to match (see calibrate). */
const ROLLOUT_SHARE = 0.7;
/** Share of the trainer's time that is the weight load, during which the engine generates nothing. */
const LOAD_SHARE = 0.1;


const HEAVY_TAIL = {
  describe: "response lognormal(median 512, σ 1.2) tokens per turn, 2–5 turns, tool Pareto(scale 100 ms, α 1.2) between turns",
  turns: [2, 5],
  maxResponse: 16384,
  response: (r) => lognormal(r, 512, 1.2),
  tool: (r) => Math.min(TOOL_TIMEOUT_MS, pareto(r, 100, 1.2)),
};

function deferred() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * Decodes at most CAPACITY sequences at once, each at one token per STEP_MS; the rest queue in arrival order, or, for
 * requests that carry a priority (async_training.engine_priority), higher values first as SGLang's priority
 * scheduling takes its waiting queue (no preemption of running sequences). A weight
 * load stops it, as SGLang's does: with partial rollouts (`pause`) the generations in flight stop where they are and go
 * on afterwards; without (`drain`), the load waits until every generation admitted has finished (SGLang's writer lock),
 * and none starts meanwhile.
 */
class SimEngine {
  running = 0;
  queue = [];
  busySlotMs = 0;
  /** Generations in flight (queued or decoding): what a drain waits for. */
  admitted = 0;
  /** While set, no generation starts (a load is coming or running). */
  closed = null;
  /** While set, the generations in flight wait too (partial rollouts' pause). */
  paused = null;
  drained = null;
  sleepers = new Set();

  constructor(time) {
    this.time = time;
  }

  async generate(tokens, signal, priority = 0) {
    while (this.closed) await this.closed.promise;
    this.admitted += 1;
    if (this.running < CAPACITY) this.running += 1;
    else await new Promise((resolve) => this.enqueue({ resolve, priority })); // a finishing sequence hands its slot over
    let remaining = tokens * STEP_MS;
    while (remaining > 0 && !signal.aborted) {
      while (this.paused) await this.paused.promise;
      // Its own controller, which a pause or the caller's signal aborts (AbortSignal.any leaks on Node 20).
      const interrupt = new AbortController();
      const cancel = () => interrupt.abort();
      signal.addEventListener("abort", cancel, { once: true });
      this.sleepers.add(interrupt);
      const start = this.time.now;
      await this.time.sleep(remaining, interrupt.signal);
      this.sleepers.delete(interrupt);
      signal.removeEventListener("abort", cancel);
      // Not interrupted: done (subtracting would leave a float residue that sleeps forever at the same instant).
      remaining = interrupt.signal.aborted ? remaining - (this.time.now - start) : 0;
      this.busySlotMs += this.time.now - start;
    }
    const next = this.queue.shift();
    if (next) next.resolve();
    else this.running -= 1;
    this.admitted -= 1;
    if (this.admitted === 0) this.drained?.resolve();
  }

  /** After every waiting request of the same or higher priority: arrival order within a priority. */
  enqueue(waiter) {
    let at = this.queue.length;
    while (at > 0 && this.queue[at - 1].priority < waiter.priority) at--;
    this.queue.splice(at, 0, waiter);
  }

  /** Partial rollouts: the generations in flight stop now and go on at `open`. */
  pause() {
    this.closed = deferred();
    this.paused = this.closed;
    for (const sleeper of this.sleepers) sleeper.abort();
  }

  /** Without partial rollouts: no new generation, and the ones admitted finish first. */
  async drain() {
    this.closed = deferred();
    if (this.admitted === 0) return;
    this.drained = deferred();
    await this.drained.promise;
    this.drained = null;
  }

  open() {
    const closed = this.closed;
    this.closed = null;
    this.paused = null;
    closed?.resolve();
  }
}

/** One run of the real scheduler against the simulated engine and trainer; what the table reports. */
async function simulate({ mode, threshold = 1, partial = true, syncEvery = 1, priority = false, seed, msPerToken }) {
  // trigger_parameter_sync_step k: k updates on a k-th of the batch per sync, so a version trains the same groups.
  const groupsPerStep = GROUPS / syncEvery;
  const time = new VirtualTime();
  const engine = new SimEngine(time);
  let nextGroup = 0;
  // As src/train/generation.ts: max_concurrency trajectory slots shared by every batch or group in flight.
  const slots = new Semaphore(MAX_CONCURRENCY);
  const withSlot = async (signal, fn) => {
    const release = await slots.acquire(signal).catch(() => undefined);
    if (!release) return;
    try {
      await fn();
    } finally {
      release();
    }
  };
  // Group g always draws the same trajectories, whichever mode asks for it: every mode sees the same prompts in order.
  const runGroup = async (signal, step) => {
    const trajectories = drawTrajectories(N, HEAVY_TAIL, seed * 100_003 + nextGroup++);
    // As src/train/rollout.ts's requestPriority: −step, the oldest groups first.
    const level = priority ? -step : 0;
    await Promise.all(trajectories.map((t) => withSlot(signal, () => runTrajectory(time, engine, t, signal, level))));
    return { groups: 1, tokens: trajectories.reduce((s, t) => s + t.tokens, 0), aborted: signal.aborted };
  };
  const merge = (parts) => ({ groups: parts.reduce((s, p) => s + p.groups, 0), tokens: parts.reduce((s, p) => s + p.tokens, 0) });
  const steps = [];
  let trainMs = 0;
  let unsyncedMs = 0;
  const options = {
    mode, firstStep: 1, lastStep: STEPS * syncEvery, signal: new AbortController().signal, clock: () => time.now,
    fullyAsync: {
      groupsPerBatch: groupsPerStep, stalenessThreshold: threshold, syncEvery,
      maxGroupsInFlight: Number.POSITIVE_INFINITY, maxDiscardedPerStep: groupsPerStep,
    },
    generator: {
      batch: async (step, signal) => merge(await Promise.all(Array.from({ length: GROUPS }, () => runGroup(signal, step)))),
      size: (batch) => batch.groups,
      group: async (step, signal) => {
        const value = await runGroup(signal, step);
        return { value, keep: !value.aborted };
      },
      assemble: (_step, kept) => merge(kept),
    },
    trainer: {
      train: async (_step, batch, sync) => {
        const ms = batch.tokens * msPerToken;
        await time.sleep(ms * (1 - LOAD_SHARE)); // the update: the engine goes on generating
        trainMs += ms * (1 - LOAD_SHARE);
        unsyncedMs += ms;
        if (!sync) return;
        // The load is the same work per version however many updates it took: its share of the tokens trained since.
        const loadMs = unsyncedMs * LOAD_SHARE;
        unsyncedMs = 0;
        if (partial) engine.pause();
        else await engine.drain(); // the trainer waits for the stragglers in flight
        await time.sleep(loadMs);
        trainMs += loadMs;
        engine.open();
      },
      finish: async (_step, batch, report) => {
        steps.push({ at: time.now, samples: batch.groups * N, report });
      },
    },
  };
  await time.drive(runSchedule(options));
  return summarise(steps, time.now, trainMs, engine);
}

async function runTrajectory(time, engine, trajectory, signal, priority) {
  for (let turn = 0; turn < trajectory.gen.length && !signal.aborted; turn++) {
    await engine.generate(trajectory.gen[turn], signal, priority);
    if (turn < trajectory.tool.length) await time.sleep(trajectory.tool[turn], signal);
  }
}

function summarise(steps, wallMs, trainMs, engine) {
  let previous = 0;
  let generatorIdleMs = 0;
  for (const step of steps) {
    generatorIdleMs += step.report.generatorIdle * (step.at - previous);
    previous = step.at;
  }
  const staleness = steps.flatMap((s) => s.report.syncStaleness);
  const updates = steps.flatMap((s) => s.report.staleness);
  return {
    samplesPerHour: (steps.reduce((s, x) => s + x.samples, 0) / wallMs) * 3_600_000,
    trainerIdle: 1 - trainMs / wallMs,
    generatorIdle: generatorIdleMs / previous,
    engineUtilisation: engine.busySlotMs / (CAPACITY * wallMs),
    stalenessMean: staleness.reduce((s, x) => s + x, 0) / staleness.length,
    stalenessMax: Math.max(...staleness),
    updateStalenessMax: Math.max(...updates),
    dropped: steps.reduce((s, x) => s + x.report.droppedStale, 0),
  };
}

/**
 * The trainer's cost per token, so that a synchronous step spends `share` of its time generating: a run with a free
 * trainer measures generation alone, and the update takes the rest. verl's DAPO-32B profile has rollout at about 70%
 * of step time (anchors.md).
 */
async function calibrate(seed, share) {
  const free = await simulate({ mode: "sync", seed, msPerToken: 0 });
  const tokens = STEPS * GROUPS * N * meanTokens(seed);
  const genMs = (STEPS * GROUPS * N * 3_600_000) / free.samplesPerHour;
  return ((1 - share) / share) * (genMs / tokens);
}

function meanTokens(seed) {
  let total = 0;
  for (let g = 0; g < STEPS * GROUPS; g++) total += drawTrajectories(N, HEAVY_TAIL, seed * 100_003 + g).reduce((s, t) => s + t.tokens, 0);
  return total / (STEPS * GROUPS * N);
}


const CELLS = [
  { label: "sync", mode: "sync" },
  { label: "one_step_off", mode: "one_step_off" },
  { label: "fully_async, staleness_threshold 0", mode: "fully_async", threshold: 0 },
  { label: "fully_async, staleness_threshold 0.5", mode: "fully_async", threshold: 0.5 },
  { label: "fully_async, staleness_threshold 1", mode: "fully_async", threshold: 1 },
  { label: "fully_async, staleness_threshold 2", mode: "fully_async", threshold: 2 },
  { label: "fully_async, staleness_threshold 0, trigger_parameter_sync_step 4", mode: "fully_async", threshold: 0, syncEvery: 4 },
  { label: "fully_async, staleness_threshold 0.5, trigger_parameter_sync_step 4", mode: "fully_async", threshold: 0.5, syncEvery: 4 },
  { label: "fully_async, staleness_threshold 1, trigger_parameter_sync_step 4", mode: "fully_async", threshold: 1, syncEvery: 4 },
  { label: "fully_async, staleness_threshold 2, trigger_parameter_sync_step 4", mode: "fully_async", threshold: 2, syncEvery: 4 },
  { label: "fully_async, staleness_threshold 2, engine_priority", mode: "fully_async", threshold: 2, priority: true },
  { label: "fully_async, staleness_threshold 1, trigger_parameter_sync_step 4, engine_priority", mode: "fully_async", threshold: 1, syncEvery: 4, priority: true },
  { label: "fully_async, staleness_threshold 2, trigger_parameter_sync_step 4, engine_priority", mode: "fully_async", threshold: 2, syncEvery: 4, priority: true },
  { label: "one_step_off, partial_rollout false", mode: "one_step_off", partial: false },
  { label: "fully_async, staleness_threshold 1, partial_rollout false", mode: "fully_async", threshold: 1, partial: false },
  { label: "fully_async, staleness_threshold 2, partial_rollout false", mode: "fully_async", threshold: 2, partial: false },
];

async function table(share, cells) {
  const rows = cells.map(() => []);
  for (const seed of SEEDS) {
    const msPerToken = await calibrate(seed, share);
    const results = [];
    for (const cell of cells) results.push(await simulate({ ...cell, seed, msPerToken }));
    const base = results[0].samplesPerHour;
    results.forEach((r, i) => rows[i].push({ ...r, ratio: r.samplesPerHour / base }));
  }
  return rows;
}

const started = performance.now();
const out = ["## Asynchronous training (real scheduler, simulated engine and trainer)", ""];
out.push(
  `The scheduler \`agentrl train\` runs (dist/train/schedule) drives a simulated engine and trainer in virtual time: ` +
    `${STEPS} steps of ${GROUPS} prompts × n = ${N} (${GROUPS * N} trajectories), *heavy tail* workload (${HEAVY_TAIL.describe}). ` +
    `Engine: ${CAPACITY} sequences decode at once, each at one token per ${STEP_MS} ms, the rest queue; ` +
    `max_concurrency ${MAX_CONCURRENCY} trajectories in flight, shared by all groups (fully_async admits groups by staleness_threshold alone, as \`agentrl train\` does). ` +
    `Trainer: update and weight sync take a fixed time per token of the batch, set so that a **sync** step spends ` +
    `${pct(ROLLOUT_SHARE)} of its time generating (verl's DAPO-32B profile); the last ${pct(LOAD_SHARE)} of it is the weight load, ` +
    `during which the engine generates nothing: with partial rollouts (async_training.partial_rollout, the default) the ` +
    `generations in flight pause and go on after it; without, the load first waits for every generation in flight to ` +
    `finish (SGLang's writer lock), and none starts meanwhile. Engine and trainer are separate devices ` +
    `(trainer.colocate false, which the async modes need). Every mode replays the same prompts' draws; throughput is ` +
    `samples trained per hour of simulated time over the whole run (the first step's wait included); ratios are to ` +
    `sync on the same seed, medians over ${SEEDS.length} seeds (min–max). Idle: the scheduler's trainer/idle_ratio and ` +
    `rollouter/idle_ratio over the run; engine utilisation is busy decode slots / capacity. ` +
    `The trigger_parameter_sync_step 4 rows are verl's like-for-like setting (its fully_async README): ${STEPS} versions of ` +
    `4 updates on ${GROUPS / 4} groups each, the same ${GROUPS} groups per synced version as sync trains in one step ` +
    `(sync with ppo_mini_batch_size ${GROUPS / 4} makes the same 4 optimizer steps); each update costs its own tokens, ` +
    `and the load, once per version, costs what sync's does. Staleness is counted in syncs (verl's parameter versions, ` +
    `what the bound limits; equal to updates when every update is synced), and its maximum in updates beside it.`,
);
out.push("");
out.push("| mode | samples/h | × sync | trainer idle | generator idle | engine utilisation | staleness mean / max (syncs) | max in updates | dropped stale groups |");
out.push("|---|---|---|---|---|---|---|---|---|");
const main = await table(ROLLOUT_SHARE, CELLS);
CELLS.forEach((cell, i) => {
  const r = main[i];
  const m = (key) => median(r.map((x) => x[key]));
  out.push(
    `| ${cell.label} | ${m("samplesPerHour").toFixed(0)} | ${range(r.map((x) => x.ratio))} | ${pct(m("trainerIdle"))} | ` +
      `${pct(m("generatorIdle"))} | ${pct(m("engineUtilisation"))} | ${fmt(m("stalenessMean"))} / ${Math.max(...r.map((x) => x.stalenessMax))} | ` +
      `${Math.max(...r.map((x) => x.updateStalenessMax))} | ${m("dropped")} |`,
  );
});
out.push("");
out.push("Sensitivity to the split (× sync; rollout share of a sync step):");
out.push("");
const shares = [0.5, 0.7, 0.85];
const picked = [
  "one_step_off",
  "fully_async, staleness_threshold 1",
  "fully_async, staleness_threshold 2",
  "fully_async, staleness_threshold 1, trigger_parameter_sync_step 4",
  "fully_async, staleness_threshold 2, trigger_parameter_sync_step 4",
].map((label) => CELLS.find((cell) => cell.label === label));
out.push(`| mode | ${shares.map((s) => `rollout ${pct(s)}`).join(" | ")} |`);
out.push(`|---|${shares.map(() => "---").join("|")}|`);
const bySplit = [];
for (const share of shares) bySplit.push(await table(share, [CELLS[0], ...picked]));
picked.forEach((cell, i) => out.push(`| ${cell.label} | ${bySplit.map((rows) => range(rows[i + 1].map((x) => x.ratio))).join(" | ")} |`));
out.push("");
out.push(
  "Updates per sync (trigger_parameter_sync_step k, each update on 32 / k groups; × sync, and in brackets the most " +
    "updates a trained group lagged): more updates per sync stream the trainer through a version, and a bound in syncs " +
    "allows proportionally more lag in updates.",
);
out.push("");
const perSync = [1, 2, 4, 8];
out.push(`| staleness_threshold | ${perSync.map((k) => `k = ${k}`).join(" | ")} |`);
out.push(`|---|${perSync.map(() => "---").join("|")}|`);
for (const threshold of [1, 2]) {
  const cells = perSync.map((k) => ({ label: `k ${k}`, mode: "fully_async", threshold, syncEvery: k }));
  const rows = await table(ROLLOUT_SHARE, [CELLS[0], ...cells]);
  const text = rows.slice(1).map((r) => `${range(r.map((x) => x.ratio))} [${Math.max(...r.map((x) => x.updateStalenessMax))}]`);
  out.push(`| ${threshold} | ${text.join(" | ")} |`);
}
out.push("");
out.push(
  "Context, not comparable one to one (anchors.md): verl reports **2.35–2.67×** end to end for fully_async " +
    "(Qwen2.5-Math-7B, 128 GPUs; streaming alone ~1.6×, the rest from staleness and partial rollouts) and +23–40% " +
    "for one_step_off; AReaL v0.3 reports **2.77×** over synchronous training. Those runs also split the GPUs " +
    "between engine and trainer to balance the two; here the split is fixed by the rollout share. fully_async with " +
    "staleness_threshold 0 runs exactly as sync: the check that the admission rule reduces to the synchronous " +
    "schedule. The partial_rollout false rows show what the pause buys: without it every sync waits for the " +
    "longest generation in flight.",
);
process.stdout.write(`${out.join("\n")}\n`);
process.stderr.write(`async-training: ${((performance.now() - started) / 1000).toFixed(1)} s real time\n`);
