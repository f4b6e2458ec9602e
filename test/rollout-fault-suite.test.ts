/**
 * The fault suite of issue 15 (docs/fault-suite.md reports its figures):
 * - 20% of /generate requests fail, with every transient fault there is (500, 503, reset, hang, body cut mid-way,
 *   malformed JSON), under the default retry settings and a timeout suited to the server: no trajectory may end
 *   failed, and none may be lost, duplicated or hung.
 * - A slow server (a few generation slots, the rest queued) with a timeout shorter than the queue and a few hung
 *   requests: adaptive concurrency keeps the timeouts near the number of hangs, where a fixed concurrency lets
 *   them snowball.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import path from "node:path";
import { runCli } from "./helpers/cli.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import {
  GSM8K_TOOLS as TOOLS,
  preprocessGsm8kTrain,
  readAllTrajectories,
  tempDir,
  toolThenAnswer,
} from "./helpers/rollout-run.js";
import { startFakeSglang, type Fault, type FakeSglang, type RespondFn } from "./fake-sglang/index.js";
import { loadChatModel } from "../src/chat/index.js";

/** The faults' random seed; FAULT_SEED=… reruns the suite on another draw. */
const SEED = Number(process.env.FAULT_SEED ?? 11);
let respond: RespondFn;
const dir = tempDir("fault-suite");
const data = path.join(dir, "train.parquet");
beforeAll(async () => {
  respond = toolThenAnswer(await loadChatModel(QWEN3_DIR));
  expect((await preprocessGsm8kTrain(dir, 64)).code).toBe(0);
});

const TRANSIENT: Fault[] = [
  { type: "status", status: 500 },
  { type: "status", status: 503 },
  { type: "reset" },
  { type: "hang" },
  { type: "drip", intervalMs: 2, chunkBytes: 64, cutAfterBytes: 100 },
  { type: "malformed-json" },
];

function rolloutArgs(out: string, extra: string[]): string[] {
  return [
    "rollout", "--data", data, "--model", QWEN3_DIR, "--tools", TOOLS, "--out", out, "--json", ...extra,
  ];
}

describe("rollout under 20% transient faults, default retries", () => {
  let fake: FakeSglang;
  afterAll(async () => fake?.close());

  it("ends all 128 trajectories completed, each once", async () => {
    fake = await startFakeSglang({
      respond: (ids, params, ctx) => respond(ids, params, ctx),
      faults: { random: { seed: SEED, rate: 0.2, faults: TRANSIENT } },
    });
    const out = path.join(dir, "faults.jsonl");
    const result = await runCli(
      rolloutArgs(out, [
        "--server", fake.url, "--limit", "64", "--n", "2", "--concurrency", "32",
        // The fake answers at once, so 2 s is ample; the retry settings are the defaults.
        "--set", "actor_rollout_ref.rollout.server.timeout=2",
      ]),
      { timeoutMs: 240_000 },
    );
    expect(result.code, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout);
    const all = await readAllTrajectories(out);
    expect(all).toHaveLength(128);
    expect(new Set(all.map((t) => t.id)).size).toBe(128);
    expect(all.filter((t) => t.status !== "completed").map((t) => `${t.id}: ${t.status} ${t.error ?? ""}`)).toEqual([]);
    // Every kind of fault was injected, and the retries that beat them are on record.
    for (const kind of ["status", "reset", "hang", "drip", "malformed-json"]) expect(fake.stats.faults[kind] ?? 0).toBeGreaterThan(0);
    const injected = Object.values(fake.stats.faults).reduce((a, b) => a + b, 0);
    expect(report.engine.retries).toBe(injected);
    expect(all.reduce((sum, t) => sum + t.retries, 0)).toBe(injected);
    if (process.env.FAULT_SUITE_REPORT) console.log(JSON.stringify({ faults: fake.stats.faults, engine: report.engine, wall_ms: report.wall_ms }));
  }, 300_000);
});

/**
 * 4 slots of 150 ms: an item that finds 28 ahead of it waits 6 whole rounds behind the 24 queued, after the 4 running
 * free their slots, and then runs its own 150 ms: over the 1 s timeout by the server's schedule alone, however late
 * the machine's timers run.
 */
const DOOMED_DEPTH = 28;
const CONCURRENCY = 32;

describe("a slow server with a timeout shorter than its queue", () => {
  /**
   * 4 generation slots of 150 ms and 32 trajectories: a full queue waits 1.2 s, past the 1 s timeout; 3% hang. The
   * timeouts themselves depend on the machine too (a loaded CI machine added a dozen to the adaptive run), so the
   * claim is also checked on the queue depths the server saw (DOOMED_DEPTH).
   */
  async function run(
    adaptive: boolean,
  ): Promise<{ timeouts: number; hangs: number; doomedAfterStart: number; timedOutAfterStart: number; failed: number; count: number; report: any }> {
    const fake = await startFakeSglang({
      respond: (ids, params, ctx) => respond(ids, params, ctx),
      latencyMs: 150,
      capacity: 4,
      faults: { random: { seed: SEED, rate: 0.03, faults: [{ type: "hang" }] } },
    });
    try {
      const out = path.join(dir, `slow-${adaptive}.jsonl`);
      const result = await runCli(
        rolloutArgs(out, [
          "--server", fake.url, "--limit", "48", "--n", "2", "--concurrency", String(CONCURRENCY),
          "--set", "actor_rollout_ref.rollout.server.timeout=1",
          "--set", `actor_rollout_ref.rollout.server.adaptive_concurrency=${adaptive}`,
        ]),
        { timeoutMs: 240_000 },
      );
      const report = JSON.parse(result.stdout);
      const all = await readAllTrajectories(out);
      return {
        timeouts: report.engine.attemptErrors.timeout,
        hangs: fake.stats.faults.hang ?? 0,
        // The start's burst (32 at once into 4 slots) and its retries come before any answer can cut the limit.
        doomedAfterStart: fake.stats.depthsAtArrival.slice(2 * CONCURRENCY).filter((depth) => depth >= DOOMED_DEPTH).length,
        // Requests the client gave up on while the server queued or ran them (the hangs never reach the queue).
        timedOutAfterStart: fake.stats.abortedUnanswered.filter((arrival) => arrival >= 2 * CONCURRENCY).length,
        failed: all.filter((t) => t.status !== "completed").length,
        count: all.length,
        report,
      };
    } finally {
      await fake.close();
    }
  }

  it("keeps timeouts near the injected hangs with adaptive concurrency, and not without", async () => {
    const adaptive = await run(true);
    const fixed = await run(false);
    if (process.env.FAULT_SUITE_REPORT) {
      console.log(JSON.stringify({ adaptive: { ...adaptive, report: adaptive.report.engine }, fixed: { ...fixed, report: fixed.report.engine } }));
    }
    expect(adaptive.count).toBe(96);
    expect(adaptive.failed).toBe(0);
    expect(adaptive.hangs).toBeGreaterThan(0);
    // Why the timeouts stay near the hangs, by the server's schedule rather than the machine's clock (a loaded
    // machine adds timeouts to both runs): once past the start, the adaptive client never sends a request into a
    // queue that outlasts the timeout, where the fixed one keeps doing so.
    expect(adaptive.doomedAfterStart).toBeLessThanOrEqual(2);
    expect(fixed.doomedAfterStart).toBeGreaterThan(20);
    // The same on the timeouts themselves, past the start and leaving out the hangs: the start's burst is the same
    // for both runs and a loaded machine adds timeouts to it (the whole runs' counts were 14 against 52-80 quiet, 28
    // against 80 in a loaded CI run).
    expect(fixed.timeouts).toBeGreaterThan(adaptive.timeouts);
    expect(fixed.timedOutAfterStart).toBeGreaterThan(3 * adaptive.timedOutAfterStart);
    expect(adaptive.report.engine.concurrency.decreases).toBeGreaterThan(0);
    expect(fixed.report.engine.concurrency).toMatchObject({ decreases: 0, lowest: 32 });
  }, 480_000);
});

describe("the summary of a run that met overload", () => {
  let fake: FakeSglang;
  afterAll(async () => fake?.close());

  it("says how far the requests in flight were cut", async () => {
    fake = await startFakeSglang({
      respond: (ids, params, ctx) => respond(ids, params, ctx),
      faults: { queue: [{ type: "status", status: 503 }, { type: "status", status: 429 }] },
    });
    const out = path.join(dir, "overload.jsonl");
    const args = rolloutArgs(out, ["--server", fake.url, "--limit", "4", "--concurrency", "8", "--set", "actor_rollout_ref.rollout.server.retry_delay=0.01"]);
    const result = await runCli(args.filter((arg) => arg !== "--json"));
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/server overload .*: requests in flight cut [12] time\(s\), lowest [24] of 8/);
  });
});
