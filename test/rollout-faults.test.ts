/**
 * `agentrl rollout` under faults: a server that fails a fifth of the requests (5xx, resets, hangs past the request
 * timeout), and a run killed with SIGKILL and resumed. Every trajectory must end complete or failed with a reason,
 * nothing may hang or be duplicated, and a resumed run must end with exactly one record per sample.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, readFileSync } from "node:fs";
import { spawn } from "node:child_process";
import path from "node:path";
import { CLI, runCli } from "./helpers/cli.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import {
  GSM8K_TOOLS as TOOLS,
  preprocessGsm8kTrain,
  readAllTrajectories as readAll,
  tempDir as tmp,
  toolThenAnswer,
} from "./helpers/rollout-run.js";
import { startFakeSglang, type FakeSglang, type RespondFn } from "./fake-sglang/index.js";
import { loadChatModel } from "../src/chat/index.js";

let respond: RespondFn;
const data = tmp("faults-data");
beforeAll(async () => {
  // Calls the GSM8K tool with answer 18, then answers "#### 18".
  respond = toolThenAnswer(await loadChatModel(QWEN3_DIR));
  expect((await preprocessGsm8kTrain(data, 100)).code).toBe(0);
});

describe("rollout against a server failing 20% of requests", () => {
  let fake: FakeSglang;
  afterAll(async () => fake?.close());

  it("ends every trajectory completed or failed with a reason, with bounded retries and no duplicates", async () => {
    // Besides the random faults, every request for the first prompt seen fails: its 2 samples must end failed.
    let doomedPrompt: string | undefined;
    fake = await startFakeSglang({
      respond: (ids, params, ctx) => respond(ids, params, ctx),
      faults: {
        decide: ({ body }) => {
          const ids = JSON.stringify((body as { input_ids?: unknown }).input_ids);
          doomedPrompt ??= ids;
          return ids === doomedPrompt ? { type: "status", status: 503 } : null;
        },
        random: { seed: 7, rate: 0.2, faults: [{ type: "status", status: 503 }, { type: "reset" }, { type: "hang" }] },
      },
    });
    const out = path.join(tmp("faults-out"), "t.jsonl");
    const result = await runCli(
      [
        "rollout", "--data", path.join(data, "train.parquet"), "--model", QWEN3_DIR, "--server", fake.url, "--tools", TOOLS,
        "--limit", "30", "--n", "2", "--concurrency", "16", "--out", out, "--json",
        "--set", "actor_rollout_ref.rollout.server.timeout=1",
        "--set", "actor_rollout_ref.rollout.server.max_attempts=2",
        "--set", "actor_rollout_ref.rollout.server.retry_delay=0.01",
      ],
      { timeoutMs: 120_000 },
    );
    const report = JSON.parse(result.stdout);
    const all = await readAll(out);
    expect(all).toHaveLength(60);
    expect(new Set(all.map((t) => t.id)).size).toBe(60);
    expect(all.filter((t) => t.status !== "completed" && t.status !== "failed")).toEqual([]);
    const failed = all.filter((t) => t.status === "failed");
    expect(failed.length).toBeGreaterThanOrEqual(2);
    for (const t of failed) {
      expect(t.finish_reason).toBe("error");
      expect(t.error).toBeTruthy();
      // `retries` sums the trajectory's requests: the failing one used both tries, and each turn before it at most 2.
      expect(t.retries).toBeGreaterThanOrEqual(1);
      expect(t.retries).toBeLessThanOrEqual(t.assistant_turns + 1);
    }
    // The doomed prompt's two samples failed on their first request, after exactly one retry.
    const doomed = failed.filter((t) => t.assistant_turns === 0 && t.retries === 1);
    const byPrompt = new Map<number, number>();
    for (const t of doomed) byPrompt.set(t.data_index, (byPrompt.get(t.data_index) ?? 0) + 1);
    expect([...byPrompt.values()]).toContain(2);
    expect(report.summary.byStatus.completed ?? 0).toBe(60 - failed.length);
    // With 2 tries per request and 20% faults, some requests were retried and recovered...
    expect(report.engine.retries).toBeGreaterThan(0);
    expect(all.some((t) => t.retries > 0 && t.status === "completed")).toBe(true);
    // ...and the exit code says that some trajectories failed, and how many.
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${failed.length} of 60 trajectories failed`);
  });
});

describe("rollout killed with SIGKILL, then --resume", () => {
  let fake: FakeSglang;
  afterAll(async () => fake?.close());

  it("ends with exactly 200 distinct records", async () => {
    fake = await startFakeSglang({ respond: (ids, params, ctx) => respond(ids, params, ctx), latencyMs: 25 });
    const out = path.join(tmp("kill-out"), "t.parquet");
    const args = [
      "rollout", "--data", path.join(data, "train.parquet"), "--model", QWEN3_DIR, "--server", fake.url, "--tools", TOOLS,
      "--n", "2", "--concurrency", "8", "--out", out, "--set", "output.row_group_size=16",
    ];
    const child = spawn(process.execPath, [CLI, ...args], { stdio: "ignore" });
    // Listening from the start, so a run that ends before the kill still settles.
    const closed = new Promise((r) => child.on("close", r));
    const pending = path.join(`${out}.parts`, "pending.jsonl");
    const partsDir = `${out}.parts`;
    // Kill once some trajectories are on disk but the run is far from done.
    const deadline = Date.now() + 60_000;
    for (;;) {
      const lines = existsSync(pending) ? readFileSync(pending, "utf8").split("\n").length - 1 : 0;
      if (lines >= 10 || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill("SIGKILL");
    await closed;
    const before = await readAll(out);
    expect(before.length).toBeGreaterThan(0);
    expect(before.length).toBeLessThan(200);

    const resumed = await runCli([...args, "--resume", "--json"], { timeoutMs: 120_000 });
    expect(resumed.code, resumed.stderr).toBe(0);
    const report = JSON.parse(resumed.stdout);
    expect(report.resumed).toBe(before.length);
    expect(report.summary.count).toBe(200 - before.length);
    const all = await readAll(out);
    expect(all).toHaveLength(200);
    expect(new Set(all.map((t) => t.id)).size).toBe(200);
    expect(existsSync(partsDir)).toBe(false);
  });
});

describe("rollout interrupted with SIGINT, then --resume", () => {
  let fake: FakeSglang;
  afterAll(async () => fake?.close());

  it("exits 130 with a finished, readable file, and --resume completes it without duplicates", async () => {
    fake = await startFakeSglang({ respond: (ids, params, ctx) => respond(ids, params, ctx), latencyMs: 25 });
    const out = path.join(tmp("sigint-out"), "t.jsonl");
    const args = [
      "rollout", "--data", path.join(data, "train.parquet"), "--model", QWEN3_DIR, "--server", fake.url, "--tools", TOOLS,
      "--limit", "60", "--concurrency", "8", "--out", out,
    ];
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ["ignore", "ignore", "pipe"] });
    const closed = new Promise((r) => child.on("close", r));
    let stderr = "";
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const deadline = Date.now() + 60_000;
    while ((existsSync(out) ? readFileSync(out, "utf8").split("\n").length - 1 : 0) < 5 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill("SIGINT");
    const code = await closed;
    expect(code).toBe(130);
    expect(stderr).toContain("--resume");
    const before = await readAll(out);
    expect(before.length).toBeGreaterThan(0);
    expect(before.length).toBeLessThan(60);
    // Cut-short trajectories are not recorded: nothing in the file was cancelled.
    expect(before.every((t) => t.finish_reason !== "cancelled")).toBe(true);
    const resumed = await runCli([...args, "--resume", "--json"], { timeoutMs: 120_000 });
    expect(resumed.code, resumed.stderr).toBe(0);
    const all = await readAll(out);
    expect(all).toHaveLength(60);
    expect(new Set(all.map((t) => t.id)).size).toBe(60);
  });
});
