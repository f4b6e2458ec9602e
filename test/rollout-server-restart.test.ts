/**
 * `agentrl rollout` when its server goes away mid-run: restarted on the same port after a short outage (every
 * trajectory rides it out through bounded retries, visible in the report and the records), or gone for good (every
 * trajectory still ends, failed with the connection error as its reason, and the run exits 1 without hanging).
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { CLI, REPO_ROOT, SHARED, runCli } from "./helpers/cli.js";
import { IM_END, QWEN3_DIR } from "./helpers/qwen3.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { loadChatModel } from "../src/chat/index.js";
import { readTrajectories } from "../src/data/trajectory-store.js";
import type { Trajectory } from "../src/data/trajectory.js";
import { tempDir as tmp } from "./helpers/tmp.js";

const GSM8K = path.join(SHARED, "datasets", "gsm8k");
const TOOLS = path.join(REPO_ROOT, "tool-configs/gsm8k_tool_config.yaml");
const data = tmp("restart-data");
let respond: (ids: number[]) => number[];
let fake: FakeSglang | undefined;

async function readAll(file: string): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for await (const t of readTrajectories(file)) out.push(t);
  return out;
}

const linesIn = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").split("\n").length - 1 : 0);

/** Starts a 40-prompt, n = 2 rollout in the background; resolves when the process exits. */
function startRollout(url: string, out: string, extra: string[]) {
  const args = [
    "rollout", "--data", path.join(data, "train.parquet"), "--model", QWEN3_DIR, "--server", url, "--tools", TOOLS,
    "--limit", "40", "--n", "2", "--concurrency", "16", "--out", out, "--json", ...extra,
  ];
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c) => (stdout += c));
  child.stderr.on("data", (c) => (stderr += c));
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on("close", (code) => resolve({ code, stdout, stderr })),
  );
  const timer = setTimeout(() => child.kill("SIGKILL"), 90_000);
  void done.then(() => clearTimeout(timer));
  return done;
}

/** Waits until some trajectories are on disk, so the outage lands mid-run. */
async function someWritten(out: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (linesIn(out) < 10 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(linesIn(out)).toBeGreaterThanOrEqual(10);
}

beforeAll(async () => {
  const model = await loadChatModel(QWEN3_DIR);
  const toolResponse = model.tokenToId("<tool_response>")!;
  const call = [...model.encode('<tool_call>\n{"name": "calc_gsm8k_reward", "arguments": {"answer": "18"}}\n</tool_call>'), IM_END];
  const answer = [...model.encode("#### 18"), IM_END];
  respond = (ids) => (ids.includes(toolResponse) ? answer : call);
  expect((await runCli(["preprocess", "gsm8k", "-i", GSM8K, "-o", data, "--split", "train", "--limit", "40"])).code).toBe(0);
});

afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

describe("rollout across a server restart", () => {
  it("completes every trajectory after a short outage, with the retries counted", async () => {
    fake = await startFakeSglang({ respond: (ids) => respond(ids), latencyMs: 40 });
    const out = path.join(tmp("restart-out"), "t.jsonl");
    const finished = startRollout(fake.url, out, [
      "--set", "actor_rollout_ref.rollout.server.max_attempts=6",
      "--set", "actor_rollout_ref.rollout.server.retry_delay=0.2",
    ]);
    await someWritten(out);
    await fake.stop();
    await new Promise((r) => setTimeout(r, 500));
    await fake.restart();
    const result = await finished;
    expect(result.code, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout);
    const all = await readAll(out);
    expect(all).toHaveLength(80);
    expect(new Set(all.map((t) => t.id)).size).toBe(80);
    expect(all.every((t) => t.status === "completed")).toBe(true);
    // The outage shows: retried requests in the engine's report and in the records that lived through it.
    expect(report.engine.retries).toBeGreaterThan(0);
    expect(all.filter((t) => t.retries > 0).length).toBeGreaterThan(0);
    expect(report.summary.retries).toBe(all.reduce((a, t) => a + t.retries, 0));
  });

  it("ends every trajectory, failed with a reason, when the server never comes back", async () => {
    fake = await startFakeSglang({ respond: (ids) => respond(ids), latencyMs: 40 });
    const out = path.join(tmp("gone-out"), "t.jsonl");
    const finished = startRollout(fake.url, out, [
      "--set", "actor_rollout_ref.rollout.server.max_attempts=3",
      "--set", "actor_rollout_ref.rollout.server.retry_delay=0.05",
      "--set", "actor_rollout_ref.rollout.server.connect_timeout=1",
    ]);
    await someWritten(out);
    await fake.stop();
    const result = await finished;
    expect(result.code).toBe(1);
    const all = await readAll(out);
    expect(all).toHaveLength(80);
    const failed = all.filter((t) => t.status === "failed");
    expect(failed.length).toBeGreaterThan(0);
    for (const t of failed) {
      expect(t.finish_reason).toBe("error");
      expect(t.error).toMatch(/connect|ECONNREFUSED|reset|socket/i);
    }
    expect(all.every((t) => t.status === "completed" || t.status === "failed")).toBe(true);
    expect(result.stderr).toContain(`${failed.length} of 80 trajectories failed`);
  });
});
