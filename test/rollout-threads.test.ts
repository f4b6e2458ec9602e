/**
 * `agentrl rollout --threads N`: trajectories run in worker threads while the main thread keeps the one scheduler and
 * the one output file. Against the fake SGLang server, whose replies are a pure function of the request (the
 * per-sample seed), one thread and two write the same trajectories (every field but the timings; the file is in
 * completion order, so they are compared by id) and report the same counts, and two threads with output.order=sample
 * write those same trajectories in sample order; a thread that crashes or cannot start fails the run naming the
 * thread and the samples it held; nothing is left in the temp folder. (One thread refusing a too-long prompt is
 * test/inputs-before-outputs.test.ts's; here two threads must refuse it the same way.)
 */
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "./helpers/cli.js";
import { IM_END, QWEN3_DIR } from "./helpers/qwen3.js";
import { GSM8K_TOOLS, preprocessGsm8kTrain, readAllTrajectories, spawnCli, tempDir, toolThenAnswer } from "./helpers/rollout-run.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { loadChatModel } from "../src/chat/index.js";
import type { Trajectory } from "../src/data/trajectory.js";

const PROMPTS = 6;
const N = 2;
/** The CLI's own temp folder: checked empty at the end (worker threads and their clean-up included). */
const cliTmp = tempDir("threads-cli-tmp");
const work = tempDir("threads");
let fake: FakeSglang;
let train: string;

/** Fields that measure time: they differ between any two runs. */
const TIMING_KEYS = new Set(["started_at", "gen_ms", "tool_ms", "total_ms", "latency_ms"]);

/** The trajectory without its timings, nested records included. */
function withoutTimings(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutTimings);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(Object.entries(value).filter(([key]) => !TIMING_KEYS.has(key)).map(([key, v]) => [key, withoutTimings(v)]));
}

function rollout(threads: number, out: string, extra: string[] = []) {
  return runCli(
    [
      "rollout", "--data", train, "--model", QWEN3_DIR, "--server", fake.url, "--tools", GSM8K_TOOLS,
      "--limit", String(PROMPTS), "--n", String(N), "--concurrency", "5", "--seed", "3", "--threads", String(threads),
      "--out", out, "--json", ...extra,
    ],
    { env: { TMPDIR: cliTmp }, timeoutMs: 60_000 },
  );
}

/** An agent loop module that misbehaves on row 3 (`how`), and runs the built-in tool loop on every other row. */
function loopThat(how: string): string[] {
  const file = path.join(work, `loop-${Math.random().toString(36).slice(2)}.mjs`);
  writeFileSync(file, `export default async function (agent) {\n  if (agent.sample.dataIndex === 3) { ${how} }\n  return agent.runToolLoop();\n}\n`);
  // The rows name tool_agent (agentrl preprocess writes agent_name): a module under that name replaces the built-in.
  return ["--set", `actor_rollout_ref.rollout.agent.agent_loops.tool_agent=${file}`];
}

/** A server that answers the first `fast` generations and holds every later one for a minute. */
async function stallingServer(fast: number): Promise<FakeSglang> {
  const answer = toolThenAnswer(await loadChatModel(QWEN3_DIR));
  return startFakeSglang({
    respond: async (ids, params, ctx) => {
      if (ctx.callIndex >= fast) await new Promise((r) => setTimeout(r, 60_000).unref());
      return answer(ids, params, ctx);
    },
  });
}

beforeAll(async () => {
  const model = await loadChatModel(QWEN3_DIR);
  fake = await startFakeSglang({ respond: toolThenAnswer(model, (params) => String(Number(params.sampling_seed ?? 0) % 997)) });
  const prep = await preprocessGsm8kTrain(work, PROMPTS);
  expect(prep.code, prep.stderr).toBe(0);
  train = path.join(work, "train.parquet");
});

afterAll(async () => {
  await fake?.close();
  // Every run's threads, tool instances and writers are closed: nothing of theirs is left behind.
  expect(readdirSync(cliTmp)).toEqual([]);
});

describe("agentrl rollout --threads", () => {
  /** One thread, two threads, and two threads with output.order=sample: started together in the first test. */
  let runs: Promise<Array<{ report: Record<string, unknown>; trajectories: Trajectory[] }>> | undefined;
  const threeRuns = () =>
    (runs ??= Promise.all(
      [[1, []], [2, []], [2, ["--set", "output.order=sample"]]].map(async ([threads, extra], i) => {
        const out = path.join(work, `${i === 2 ? "ordered-" : ""}t${threads}.jsonl`);
        const result = await rollout(threads as number, out, extra as string[]);
        expect(result.code, result.stderr).toBe(0);
        return { report: JSON.parse(result.stdout) as Record<string, unknown>, trajectories: await readAllTrajectories(out) };
      }),
    ));

  it("writes the same trajectories and reports the same counts with 1 and 2 threads", async () => {
    const runs = (await threeRuns()).slice(0, 2);
    const [one, two] = runs.map(({ trajectories }) => new Map(trajectories.map((t: Trajectory) => [t.id, withoutTimings(t)])));
    expect(one!.size).toBe(PROMPTS * N);
    expect([...two!.keys()].sort()).toEqual([...one!.keys()].sort());
    for (const [id, trajectory] of one!) expect(two!.get(id), id).toEqual(trajectory);
    // The replies really differ between samples, or comparing them would prove little.
    expect(new Set(runs[0]!.trajectories.map((t) => t.response_ids.join(","))).size).toBeGreaterThan(PROMPTS);
    // The same summary and engine counters (the threads' clients added up: max_concurrency split between them).
    const [reportOne, reportTwo] = runs.map(({ report: { out: _out, wall_ms: _wall, ...counts } }) => counts);
    expect(reportTwo).toEqual(reportOne);
  });

  it("with output.order=sample, 2 threads write the trajectories of 1 thread, in sample order", async () => {
    // output.order only sets how the main thread's writer orders the file (src/rollout/command.ts writerOptions), for
    // any number of threads: so the one-thread run in completion order, put in sample order, is what the file must be.
    const [one, , ordered] = await threeRuns();
    const inSampleOrder = [...one!.trajectories]
      .sort((a, b) => a.data_index - b.data_index || a.sample_index - b.sample_index)
      .map((t) => withoutTimings(t));
    const written = ordered!.trajectories.map((t) => withoutTimings(t));
    const ids = (run: unknown[]) => run.map((t) => (t as Trajectory).id);
    expect(ids(written)).toEqual(Array.from({ length: PROMPTS * N }, (_, k) => `${Math.floor(k / N)}:${k % N}`));
    expect(written).toEqual(inSampleOrder);
  });

  it("the threads' clients are one server pool: two servers, two threads, one request on each server at a time", async () => {
    // Each thread has one slot. Had each its own pool, both would send their first request to the first server (the
    // same empty view, the same tie-break), then both to the second, and so on: every request would share its server.
    const model = await loadChatModel(QWEN3_DIR);
    const answer = [...model.encode("#### 18"), IM_END];
    const servers = await Promise.all([0, 1].map(async () => {
      const load = { now: 0, arrivals: 0, shared: 0 };
      const server = await startFakeSglang({
        respond: async () => {
          load.arrivals += 1;
          if (load.now > 0) load.shared += 1;
          load.now += 1;
          await new Promise((r) => setTimeout(r, 200));
          load.now -= 1;
          return answer;
        },
      });
      return { server, load };
    }));
    try {
      const out = path.join(work, "pool.jsonl");
      const result = await runCli(
        [
          "rollout", "--data", train, "--model", QWEN3_DIR, "--server", servers[0]!.server.url, "--server", servers[1]!.server.url,
          "--limit", "4", "--n", "2", "--concurrency", "2", "--threads", "2", "--out", out, "--json",
        ],
        { env: { TMPDIR: cliTmp }, timeoutMs: 60_000 },
      );
      expect(result.code, result.stderr).toBe(0);
      expect(servers[0]!.load.arrivals + servers[1]!.load.arrivals).toBe(8);
      // Two threads picking in the same microsecond could both see a server idle: at most one such race is allowed.
      expect(servers[0]!.load.shared + servers[1]!.load.shared).toBeLessThanOrEqual(1);
    } finally {
      await Promise.all(servers.map((s) => s.server.close()));
    }
  });

  it("refuses a too-long prompt as one thread does, when filter_overlong_prompts is off", async () => {
    // One thread's refusal (exit 2, the row named, no output file) is test/inputs-before-outputs.test.ts's.
    const extra = ["--set", "data.filter_overlong_prompts=false", "--set", "data.max_prompt_length=8"];
    const out = path.join(work, "long2.jsonl");
    const two = await rollout(2, out, extra);
    expect(two.code, two.stderr).toBe(2);
    expect(two.stderr).toMatch(/train\.parquet: row 0: the rendered prompt has \d+ tokens, over data\.max_prompt_length=8/);
    // Found before the output exists, as every other input error: no partial file blocks the corrected re-run.
    expect(existsSync(out)).toBe(false);
  });

  it("over-sampling's abort reaches the threads: the stragglers end as over_sample", async () => {
    // All 12 first turns are answered (calls 0-11) and 9 second turns: the 3 others hang until over-sampling aborts them.
    const stalling = await stallingServer(21);
    try {
      const out = path.join(work, "over-sample.jsonl");
      const result = await runCli(
        [
          "rollout", "--data", train, "--model", QWEN3_DIR, "--server", stalling.url, "--tools", GSM8K_TOOLS,
          "--limit", String(PROMPTS), "--n", String(N), "--concurrency", "12", "--threads", "2",
          "--over-sample-rate", "0.25", "--out", out, "--json",
        ],
        { timeoutMs: 60_000 },
      );
      expect(result.code, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout).over_sample_aborted).toBe(3);
      const all = await readAllTrajectories(out);
      expect(all.filter((t) => t.status === "completed")).toHaveLength(9);
      expect(all.filter((t) => t.finish_reason === "over_sample")).toHaveLength(3);
    } finally {
      await stalling.close();
    }
  });

  it("Ctrl-C reaches the threads: the trajectories in flight end at once and the run exits 130", async () => {
    const stalling = await stallingServer(4);
    try {
      const out = path.join(work, "interrupted.jsonl");
      const run = spawnCli([
        "rollout", "--data", train, "--model", QWEN3_DIR, "--server", stalling.url, "--tools", GSM8K_TOOLS,
        "--limit", String(PROMPTS), "--n", String(N), "--concurrency", "4", "--threads", "2", "--out", out, "--quiet",
      ]);
      while (stalling.stats.requests < 8) await new Promise((r) => setTimeout(r, 20));
      run.child.kill("SIGINT");
      const exit = await run.exited;
      expect(exit.code, exit.stderr).toBe(130);
      expect(exit.stderr).toContain("run again with --resume to finish");
      // What was cut short is not in the file (--resume redoes it); what finished is.
      for (const t of await readAllTrajectories(out)) expect(t.finish_reason).not.toBe("cancelled");
    } finally {
      await stalling.close();
    }
  });

  it("fails the run naming the thread and the sample when a thread crashes", async () => {
    const result = await rollout(2, path.join(work, "crash.jsonl"), loopThat("process.exit(7);"));
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/rollout thread [12] of 2 exited with code 7 while running [^\n]*row 3, sample [01]/);
  });

  it("fails the run naming the thread when code in it throws outside any trajectory", async () => {
    const result = await rollout(2, path.join(work, "throw.jsonl"), loopThat('setTimeout(() => { throw new Error("loop bug on row 3"); }); await new Promise((r) => setTimeout(r, 1000));'));
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/rollout thread [12] of 2 crashed \(loop bug on row 3\) while running [^\n]*row 3, sample [01]/);
  });

  it("agentrl train refuses threads > 1 before it starts anything", async () => {
    const result = await runCli(["train", "--config", "examples/cpu-demo.yaml", "--set", "actor_rollout_ref.rollout.threads=2", "--dry-run"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("actor_rollout_ref.rollout.threads is for agentrl rollout");
  });

  it("a thread that cannot load its parts fails the start with the module's error and exit code", async () => {
    const result = await rollout(2, path.join(work, "bad-reward.jsonl"), ["--reward", path.join(work, "missing-reward.mjs")]);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toMatch(/rollout thread [12] of 2 could not start: .*missing-reward\.mjs/);
  });
});
