/**
 * Over-sampling with early abort (verl's over_sample_rate) in `agentrl rollout`: once (1 - rate) of the samples have
 * finished, the stragglers are aborted on the server and recorded as aborted/over_sample, so the run does not wait
 * for them; with the rate at 0 the same stragglers hold the run until their deadline.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import path from "node:path";
import { SHARED, runCli } from "./helpers/cli.js";
import { IM_END, QWEN3_DIR } from "./helpers/qwen3.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { loadChatModel } from "../src/chat/index.js";
import { readTrajectories } from "../src/data/trajectory-store.js";
import type { Trajectory } from "../src/data/trajectory.js";
import { overSampleTarget } from "../src/rollout/over-sample.js";
import { tempDir as tmp } from "./helpers/tmp.js";

const GSM8K = path.join(SHARED, "datasets", "gsm8k");
const data = tmp("oversample-data");
let answer: number[];
let fake: FakeSglang | undefined;

async function readAll(file: string): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for await (const t of readTrajectories(file)) out.push(t);
  return out;
}

/** A server where the first `fast` generations answer at once and every later one hangs for a minute. */
async function serverWithStragglers(fast: number): Promise<FakeSglang> {
  fake = await startFakeSglang({
    respond: async (_ids, _params, ctx) => {
      if (ctx.callIndex >= fast) await new Promise((r) => setTimeout(r, 60_000).unref());
      return answer;
    },
  });
  return fake;
}

function rollout(server: string, out: string, extra: string[]) {
  return runCli(
    ["rollout", "--data", path.join(data, "train.parquet"), "--model", QWEN3_DIR, "--server", server, "--limit", "8", "--n", "2", "--out", out, "--json", ...extra],
    { timeoutMs: 60_000 },
  );
}

beforeAll(async () => {
  const model = await loadChatModel(QWEN3_DIR);
  answer = [...model.encode("#### 18"), IM_END];
  expect((await runCli(["preprocess", "gsm8k", "-i", GSM8K, "-o", data, "--split", "train", "--limit", "8"])).code).toBe(0);
});

afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

describe("overSampleTarget", () => {
  it("is the whole batch at rate 0 and at least (1 - rate) of it otherwise", () => {
    expect(overSampleTarget(16, 0)).toBe(16);
    expect(overSampleTarget(16, 0.25)).toBe(12);
    expect(overSampleTarget(10, 0.15)).toBe(9);
    expect(overSampleTarget(1, 0.9)).toBe(1);
  });
});

describe("agentrl rollout --over-sample-rate", () => {
  it("--dry-run says how many must finish before the rest are aborted", async () => {
    const result = await runCli(["rollout", "--data", path.join(data, "train.parquet"), "--n", "2", "--over-sample-rate", "0.25", "--dry-run"]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain("over-sampling: once 12 of the trajectories have finished");
  });

  it("refuses a rate outside [0, 1) naming the key", async () => {
    const result = await runCli(["rollout", "--data", path.join(data, "train.parquet"), "--over-sample-rate", "1", "--dry-run"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("over_sample_rate");
  });

  it("aborts the stragglers once (1 - rate) have finished and records them as over_sample", async () => {
    const server = await serverWithStragglers(12);
    const out = path.join(tmp("oversample-out"), "t.jsonl");
    const result = await rollout(server.url, out, ["--concurrency", "16", "--over-sample-rate", "0.25"]);
    expect(result.code, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout);
    expect(report.over_sample_aborted).toBe(4);
    expect(report.over_sample_not_started).toBe(0);
    const all = await readAll(out);
    expect(all).toHaveLength(16);
    expect(all.filter((t) => t.status === "completed")).toHaveLength(12);
    const aborted = all.filter((t) => t.finish_reason === "over_sample");
    expect(aborted).toHaveLength(4);
    for (const t of aborted) {
      expect(t.status).toBe("aborted");
      expect(t.response_mask.includes(1)).toBe(false);
    }
    // The server was told: the four hanging generations were aborted there, not left running.
    expect(server.stats.aborted).toBe(4);
  });

  it("does not start the samples still queued when the target is reached", async () => {
    // Calls 0-6 answer at once; every call after the 8th hangs; the 8th (call 7, which reaches the target) answers
    // only once calls 8-10 have arrived. The three slots not holding call 7 therefore each hold a straggler when the
    // target is reached: those are aborted, and the five samples still queued never start. (Left to chance, which
    // slots are between two samples at that moment depends on how the journal's writes are batched.)
    let stragglersIn!: () => void;
    const threeStragglers = new Promise<void>((resolve) => (stragglersIn = resolve));
    fake = await startFakeSglang({
      respond: async (_ids, _params, ctx) => {
        if (ctx.callIndex === 7) await threeStragglers;
        if (ctx.callIndex === 10) stragglersIn();
        if (ctx.callIndex >= 8) await new Promise((r) => setTimeout(r, 60_000).unref());
        return answer;
      },
    });
    const out = path.join(tmp("oversample-queued"), "t.jsonl");
    const result = await rollout(fake.url, out, ["--concurrency", "4", "--over-sample-rate", "0.5"]);
    expect(result.code, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout);
    expect(report.over_sample_aborted).toBe(3);
    expect(report.over_sample_not_started).toBe(5);
    // No generation began after the target was reached: the server saw the 8 answered calls and the 3 stragglers.
    expect(fake.stats.rids).toHaveLength(11);
    expect(fake.stats.aborted).toBe(3);
    const all = await readAll(out);
    expect(all.filter((t) => t.status === "completed")).toHaveLength(8);
    expect(all.filter((t) => t.finish_reason === "over_sample")).toHaveLength(3);
    expect(all).toHaveLength(11);
  });

  it("keeps exactly (1 - rate) when more finish at once: the ones past the target are over-sampled, record and all", async () => {
    // Every generation waits until all 16 are in, then all are answered together: they are handed over in one batch,
    // and the 12th to be recorded reaches the target while the other four are finishing too.
    let allIn!: () => void;
    const sixteen = new Promise<void>((resolve) => (allIn = resolve));
    fake = await startFakeSglang({
      respond: async (_ids, _params, ctx) => {
        if (ctx.callIndex === 15) allIn();
        await sixteen;
        return answer;
      },
    });
    const out = path.join(tmp("oversample-together"), "t.jsonl");
    const result = await rollout(fake.url, out, ["--concurrency", "16", "--over-sample-rate", "0.25"]);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout).over_sample_aborted).toBe(4);
    const all = await readAll(out);
    expect(all).toHaveLength(16);
    expect(all.filter((t) => t.status === "completed")).toHaveLength(12);
    const overSampled = all.filter((t) => t.finish_reason === "over_sample");
    expect(overSampled.map((t) => t.status)).toEqual(["aborted", "aborted", "aborted", "aborted"]);
  });

  it("without over-sampling the same stragglers hold the run until their deadline", async () => {
    const server = await serverWithStragglers(12);
    const out = path.join(tmp("oversample-off"), "t.jsonl");
    const result = await rollout(server.url, out, ["--concurrency", "16", "--set", "actor_rollout_ref.rollout.trajectory_timeout=1"]);
    expect(result.code, result.stderr).toBe(0);
    const all = await readAll(out);
    expect(all).toHaveLength(16);
    expect(all.filter((t) => t.finish_reason === "deadline")).toHaveLength(4);
    expect(all.some((t) => t.finish_reason === "over_sample")).toBe(false);
  });
});
