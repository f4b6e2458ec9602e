/**
 * Python reward functions (custom_reward_function.path = a .py file): the process pool on its own, then
 * `agentrl rollout` end to end against the fake SGLang server, with fixture reward files in
 * test/fixtures/python-rewards/.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { copyFileSync, existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { IM_END, QWEN3_DIR } from "./helpers/qwen3.js";
import { GSM8K_DIR, readAllTrajectories, spawnCli, tempDir } from "./helpers/rollout-run.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { loadChatModel, type ChatModel } from "../src/chat/index.js";
import { InputError } from "../src/errors.js";
import { computeReward, loadRewardModule, PythonRewardPool, type RewardInput } from "../src/rewards/index.js";

const FIXTURES = path.join(REPO_ROOT, "test", "fixtures", "python-rewards");
const fixture = (name: string) => path.join(FIXTURES, name);

function call(solution: string, groundTruth = "18", extra: Record<string, unknown> = {}, kwargs: Record<string, unknown> = {}) {
  return { data_source: "openai/gsm8k", solution_str: solution, ground_truth: groundTruth, extra_info: extra, reward_kwargs: kwargs };
}

function input(responseText: string, extraInfo: Record<string, unknown> = {}): RewardInput {
  return { dataSource: "openai/gsm8k", responseText, groundTruth: "18", extraInfo, toolRewards: [], turnScores: [] };
}

/** Whether a process is still there (a zombie of ours counts as gone). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return !/^\d+ \(.*\) Z/.test(stat);
}

/** Pids of reward hosts whose command line mentions `file`. */
function hostsFor(file: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let cmdline = "";
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, "utf8");
    } catch {
      continue;
    }
    if (cmdline.includes("agentrl_worker.reward_host") && cmdline.includes(file)) pids.push(Number(entry));
  }
  return pids;
}

async function waitUntil(check: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (check()) return true;
    await sleep(100);
  }
  return check();
}

describe("the Python reward pool", () => {
  it("calls compute_score with verl's arguments and reward_kwargs, returning floats", async () => {
    const pool = await PythonRewardPool.start(fixture("gsm8k_score.py"), "compute_score", { timeout: 30, workers: 2 });
    try {
      const results = await Promise.all([
        pool.call(call("so #### 18")),
        pool.call(call("so #### 17")),
        pool.call(call("no answer")),
        pool.call(call("so #### 1,8", "18", {}, { bonus: 0.5 })),
      ]);
      expect(results).toEqual([
        { score: 1, extra: {} },
        { score: 0, extra: {} },
        { score: 0, extra: {} },
        { score: 1.5, extra: {} },
      ]);
      expect(pool.size).toBe(2);
    } finally {
      await pool.close();
    }
  });

  it("a dict's keys other than score become the record's extra (reward_extra_info), and prints do not disturb it", async () => {
    const loaded = await loadRewardModule(fixture("with_metrics.py"), "score_with_metrics", REPO_ROOT, { timeout: 30, workers: 1 });
    try {
      const record = await computeReward(input("so #### 18", { index: 7 }), loaded, { label: "gsm" }, { dataIndex: 7, trajectoryId: "t7" });
      expect(record.score).toBe(0.5);
      expect(record.extra).toEqual({ acc: true, length: 10, label: "gsm", index: 7 });
      const wrong = await computeReward(input("so #### 17"), loaded, {}, { dataIndex: 0, trajectoryId: "t0" });
      expect(wrong.score).toBe(0.25);
      expect(wrong.extra).toMatchObject({ acc: false, label: "none" });
    } finally {
      await loaded.close?.();
    }
  });

  it("a raise fails that call only, naming the row and the exception's last line", async () => {
    const pool = await PythonRewardPool.start(fixture("raises_on_row.py"), "compute_score", { timeout: 30, workers: 1 });
    try {
      const [bad, good] = await Promise.allSettled([
        pool.call(call("x", "18", { index: 1 }), { dataIndex: 4, trajectoryId: "traj-4" }),
        pool.call(call("x", "18", { index: 2 }), { dataIndex: 5, trajectoryId: "traj-5" }),
      ]);
      expect(bad).toMatchObject({ status: "rejected" });
      expect(String((bad as PromiseRejectedResult).reason.message)).toBe(
        `reward function compute_score in ${fixture("raises_on_row.py")} raised on data_index 4 (trajectory traj-4): ValueError: cannot score row 1`,
      );
      expect(good).toEqual({ status: "fulfilled", value: { score: 1, extra: {} } });
    } finally {
      await pool.close();
    }
  });

  it("NaN, infinity, text or a dict without score are errors naming the row", async () => {
    const pool = await PythonRewardPool.start(fixture("bad_results.py"), "compute_score", { timeout: 30, workers: 1 });
    try {
      const outcomes = await Promise.allSettled(["nan", "inf", "text", "nodict"].map((s, i) => pool.call(call(s), { dataIndex: i, trajectoryId: `t${i}` })));
      const messages = outcomes.map((o) => (o.status === "rejected" ? String(o.reason.message) : `fulfilled ${JSON.stringify(o.value)}`));
      expect(messages[0]).toMatch(/on data_index 0 \(trajectory t0\): returned nan; expected a finite number/);
      expect(messages[1]).toMatch(/on data_index 1 \(trajectory t1\): returned inf; expected a finite number/);
      expect(messages[2]).toMatch(/on data_index 2 \(trajectory t2\): returned 'one'; expected a finite number/);
      expect(messages[3]).toMatch(/on data_index 3 \(trajectory t3\): returned a dict without 'score' \(keys: \['acc'\]\)/);
      expect(await pool.call(call("fine"))).toEqual({ score: 2, extra: {} });
    } finally {
      await pool.close();
    }
  });

  it("a call past the timeout is killed and fails; the process restarts and the rest of its batch is scored", async () => {
    const pool = await PythonRewardPool.start(fixture("hangs.py"), "compute_score", { timeout: 1, workers: 1 });
    try {
      const before = hostsFor(fixture("hangs.py"));
      const started = Date.now();
      const [hung, after] = await Promise.allSettled([
        pool.call(call("please hang"), { dataIndex: 3, trajectoryId: "traj-3" }),
        pool.call(call("fine"), { dataIndex: 4, trajectoryId: "traj-4" }),
      ]);
      expect(Date.now() - started).toBeLessThan(20_000);
      expect(hung).toMatchObject({ status: "rejected" });
      expect(String((hung as PromiseRejectedResult).reason.message)).toBe(
        `reward function compute_score in ${fixture("hangs.py")} timed out after 1 s on data_index 3 (trajectory traj-3); its process was killed and restarted`,
      );
      expect(after).toEqual({ status: "fulfilled", value: { score: 1, extra: {} } });
      expect(before).toHaveLength(1);
      expect(alive(before[0]!)).toBe(false);
    } finally {
      await pool.close();
    }
  });

  it("a syntax error is an InputError at start-up naming the file, the function and the error", async () => {
    const err = await loadRewardModule(fixture("syntax_error.py"), "compute_score", REPO_ROOT, { timeout: 30, workers: 2 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    expect((err as InputError).exitCode).toBe(2);
    expect((err as Error).message).toMatch(/^reward file .*syntax_error\.py: cannot be loaded to find compute_score: SyntaxError: /);
    expect(hostsFor(fixture("syntax_error.py"))).toEqual([]);
  });

  it("a missing function is an InputError listing the functions the file has", async () => {
    const err = await loadRewardModule(fixture("missing_function.py"), "compute_score", REPO_ROOT, { timeout: 30, workers: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    expect((err as Error).message).toBe(
      `reward file ${fixture("missing_function.py")}: no function compute_score (custom_reward_function.name); it defines: another_scorer, score_answer`,
    );
  });

  it("a missing interpreter is an InputError naming it", async () => {
    const err = await loadRewardModule(fixture("gsm8k_score.py"), "compute_score", REPO_ROOT, { timeout: 30, workers: 1, executable: "/nonexistent/python9" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    expect((err as Error).message).toMatch(/cannot start the reward process for compute_score with \/nonexistent\/python9/);
  });

  it("close() ends every process of the pool", async () => {
    const file = path.join(tempDir("py-reward-close"), "close_me.py");
    copyFileSync(fixture("gsm8k_score.py"), file);
    const pool = await PythonRewardPool.start(file, "compute_score", { timeout: 30, workers: 3 });
    const pids = hostsFor(file);
    expect(pids).toHaveLength(3);
    await pool.close();
    expect(await waitUntil(() => pids.every((pid) => !alive(pid)), 5_000)).toBe(true);
    await expect(pool.call(call("#### 18"))).rejects.toThrow(/is closed/);
  });
});

describe("agentrl rollout with a Python reward file", () => {
  let model: ChatModel;
  let fake: FakeSglang;
  const data = tempDir("py-reward-data");
  const dataFile = path.join(data, "test.parquet");

  beforeAll(async () => {
    model = await loadChatModel(QWEN3_DIR);
    const answer = [...model.encode("16 - 3 - 4 = 9, 9 * 2 = 18.\n#### 18"), IM_END];
    fake = await startFakeSglang({ respond: () => answer });
    expect((await runCli(["preprocess", "gsm8k", "-i", GSM8K_DIR, "-o", data, "--split", "test", "--limit", "3"])).code).toBe(0);
  });
  afterAll(async () => fake?.close());

  const rollout = (out: string, ...extra: string[]) =>
    runCli(["rollout", "--data", dataFile, "--model", QWEN3_DIR, "--server", fake.url, "--out", out, "--json", "-q", ...extra]);

  it("scores every trajectory with compute_score(data_source, solution_str, ground_truth, extra_info)", async () => {
    const out = path.join(tempDir("py-reward-out"), "traj.jsonl");
    const result = await rollout(out, "--reward", fixture("gsm8k_score.py"), "--n", "2");
    expect(result.code).toBe(0);
    const all = (await readAllTrajectories(out)).sort((a, b) => a.data_index - b.data_index || a.sample_index - b.sample_index);
    // Only the first GSM8K test row's answer is 18.
    expect(all.map((t) => [t.data_index, t.status, t.reward])).toEqual([
      [0, "completed", 1], [0, "completed", 1], [1, "completed", 0], [1, "completed", 0], [2, "completed", 0], [2, "completed", 0],
    ]);
    expect(all.map((t) => t.reward_extra ?? null)).toEqual([null, null, null, null, null, null]);
  });

  it("a dict's extra keys are recorded as reward_extra and shown by agentrl inspect", async () => {
    const out = path.join(tempDir("py-reward-out"), "traj.jsonl");
    const result = await rollout(
      out, "--reward", fixture("with_metrics.py"), "--reward-name", "score_with_metrics",
      "--set", "custom_reward_function.reward_kwargs.label=gsm", "--set", "custom_reward_function.python.workers=2",
    );
    expect(result.code).toBe(0);
    const all = (await readAllTrajectories(out)).sort((a, b) => a.data_index - b.data_index);
    expect(all.map((t) => t.reward)).toEqual([0.5, 0.25, 0.25]);
    const extras = all.map((t) => t.reward_extra as Record<string, unknown>);
    expect(extras.map((e) => [e.acc, e.label, e.index])).toEqual([[true, "gsm", 0], [false, "gsm", 1], [false, "gsm", 2]]);
    const shown = await runCli(["inspect", out, "show", all[0]!.id]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/extra \{"acc":true,"length":\d+,"label":"gsm","index":0\}/);
  });

  it("a raise fails that row's trajectory with the row and the exception's last line; exit 1", async () => {
    const out = path.join(tempDir("py-reward-out"), "traj.jsonl");
    const result = await rollout(out, "--reward", fixture("raises_on_row.py"));
    expect(result.code).toBe(1);
    const all = (await readAllTrajectories(out)).sort((a, b) => a.data_index - b.data_index);
    expect(all.map((t) => [t.data_index, t.status, t.finish_reason])).toEqual([
      [0, "completed", "stop"], [1, "failed", "reward_error"], [2, "completed", "stop"],
    ]);
    expect(all[1]!.error).toBe(
      `reward function failed: reward function compute_score in ${fixture("raises_on_row.py")} raised on data_index 1 (trajectory ${all[1]!.id}): ValueError: cannot score row 1`,
    );
  });

  it("a hung reward fails its trajectory after custom_reward_function.python.timeout", async () => {
    const hangData = tempDir("py-reward-hang");
    const hang = [...model.encode("I will hang now"), IM_END];
    const hangFake = await startFakeSglang({ respond: () => hang });
    try {
      const out = path.join(hangData, "traj.jsonl");
      const result = await runCli([
        "rollout", "--data", dataFile, "--model", QWEN3_DIR, "--server", hangFake.url, "--out", out, "--json", "-q", "--limit", "1",
        "--reward", fixture("hangs.py"), "--set", "custom_reward_function.python.timeout=1",
      ]);
      expect(result.code).toBe(1);
      const [t] = await readAllTrajectories(out);
      expect(t!.status).toBe("failed");
      expect(t!.error).toMatch(/compute_score in .*hangs\.py timed out after 1 s on data_index 0 \(trajectory .+\); its process was killed/);
      expect(hostsFor(fixture("hangs.py"))).toEqual([]);
    } finally {
      await hangFake.close();
    }
  });

  it.each([
    ["syntax_error.py", /reward file .*syntax_error\.py: cannot be loaded to find compute_score: SyntaxError: /],
    ["missing_function.py", /reward file .*missing_function\.py: no function compute_score \(custom_reward_function\.name\); it defines: another_scorer, score_answer/],
  ])("%s: exit 2 before any rollout runs", async (file, message) => {
    const dir = tempDir("py-reward-bad");
    const out = path.join(dir, "traj.jsonl");
    const before = fake.stats.requests;
    const result = await rollout(out, "--reward", fixture(file));
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(fake.stats.requests).toBe(before);
    expect(existsSync(out)).toBe(false);
  });

  it("the pool dies with a SIGKILLed agentrl, even while a reward hangs", async () => {
    const dir = tempDir("py-reward-kill");
    const file = path.join(dir, "hang_forever.py");
    copyFileSync(fixture("hangs.py"), file);
    const hang = [...model.encode("hang please"), IM_END];
    const hangFake = await startFakeSglang({ respond: () => hang });
    try {
      const run = spawnCli([
        "rollout", "--data", dataFile, "--model", QWEN3_DIR, "--server", hangFake.url, "--out", path.join(dir, "traj.jsonl"), "-q",
        "--reward", file, "--set", "custom_reward_function.python.workers=2",
      ]);
      expect(await waitUntil(() => hostsFor(file).length === 2 && hangFake.stats.samples >= 3, 30_000)).toBe(true);
      const pids = hostsFor(file);
      run.child.kill("SIGKILL");
      await run.exited;
      expect(await waitUntil(() => pids.every((pid) => !alive(pid)), 10_000)).toBe(true);
    } finally {
      await hangFake.close();
    }
  });
});
