/**
 * Agent loops written in Python, end to end: the built CLI against the fake SGLang server (real Qwen3 tokenizer), the
 * loop in `python -m agentrl_worker.agent_loop_host` under bubblewrap. examples/agent-loops/plan_then_act.py, registered
 * through verl's agent loop file, must record exactly what the JS plan-then-act.mjs records; a loop's raise, its host's
 * crash and a hang past the deadline end only their trajectory; a loop that cannot load stops the run at start-up.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { rolloutWithAgents, writeAgentRows } from "./helpers/agent-loop-run.js";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { IM_END, QWEN3_DIR } from "./helpers/qwen3.js";
import { tempDir, toolThenAnswer } from "./helpers/rollout-run.js";
import { startFakeSglang, type FakeSglang, type RespondFn } from "./fake-sglang/index.js";
import { loadChatModel, type ChatModel } from "../src/chat/index.js";
import type { Trajectory } from "../src/data/trajectory.js";

const JS_EXAMPLE = path.join(REPO_ROOT, "examples/agent-loops/plan-then-act.mjs");
const PY_EXAMPLE = path.join(REPO_ROOT, "examples/agent-loops/plan_then_act.py");
const PLAN_PROMPT = "Before you solve it, write a short numbered plan. Do not call any tool yet.";
const ACT_PROMPT = "Now carry out your plan. Use the tools to check your answer, then give it as #### <number>.";
const dir = tempDir("agent-loops-py");
const f = (name: string) => path.join(dir, name);

let model: ChatModel;
let fake: FakeSglang;

const writeRows = writeAgentRows;

/** `agentrl rollout` with `agent` as actor_rollout_ref.rollout.agent (YAML lines); trajectories by row and sample. */
const rollout = (name: string, data: string, agent: string[], extra: string[] = []) =>
  rolloutWithAgents({ dir, name, data, server: fake.url, agent, rollout: extra });

/** What a loop decides: the tokens, masks, segments, calls and outcome, without timings. */
const record = (t: Trajectory) => ({
  agent_loop: t.agent_loop,
  id: t.id, status: t.status, finish_reason: t.finish_reason, prompt_ids: t.prompt_ids, response_ids: t.response_ids,
  response_mask: t.response_mask, response_logprobs: t.response_logprobs, reward: t.reward, tool_calls: t.tool_calls,
  segments: t.segments.map(({ latency_ms: _latency, ...s }) => s),
});

/** A loop file in the test folder. */
function loopFile(name: string, source: string): string {
  writeFileSync(f(name), source);
  return f(name);
}

beforeAll(async () => {
  model = await loadChatModel(QWEN3_DIR);
  const planIds = [...model.encode("1. Add 2 and 2.\n2. Check the sum with the tool."), IM_END];
  const act = toolThenAnswer(model, () => "4");
  const respond: RespondFn = (ids, params, ctx) => {
    const text = model.decode(ids);
    return text.includes(PLAN_PROMPT) && !text.includes(ACT_PROMPT) ? planIds : act(ids, params, ctx);
  };
  fake = await startFakeSglang({ respond });
});
afterAll(async () => fake?.close());

describe("plan_then_act.py through verl's agent loop file", () => {
  it("records exactly what plan-then-act.mjs records, token for token and mask for mask", async () => {
    const names = ["plan_then_act", null, "plan_then_act"];
    const data = await writeRows(f("plan.parquet"), names);
    const loopsFile = f("agent_loops.yaml");
    writeFileSync(loopsFile, [
      "- name: plan_then_act", `  _target_: ${path.relative(dir, PY_EXAMPLE)}#agent_loop`,
      "- name: tool_agent", "  _target_: verl.experimental.agent_loop.tool_agent_loop.ToolAgentLoop", "",
    ].join("\n"));
    const py = await rollout("py", data, [`agent_loop_config_path: ${loopsFile}`]);
    const js = await rollout("js", data, [`agent_loops: {plan_then_act: ${JS_EXAMPLE}}`]);
    expect(py.result.stderr).toBe("");
    expect(py.result.code).toBe(0);
    expect(js.result.code).toBe(0);
    expect(py.trajectories).toHaveLength(6);
    expect(py.trajectories.map(record)).toEqual(js.trajectories.map(record));
    // Each record names the loop that ran it: inspect shows it and filters on it.
    expect(py.trajectories.map((t) => t.agent_loop)).toEqual(["plan_then_act", "plan_then_act", "tool_agent", "tool_agent", "plan_then_act", "plan_then_act"]);
    const shown = await runCli(["inspect", py.out, "show", "0:0"]);
    expect(shown.stdout).toContain("loop plan_then_act");
    const listed = await runCli(["inspect", py.out, "list", "--where", "agent_loop=tool_agent", "--json"]);
    const matches = JSON.parse(listed.stdout) as { matched: number; rows: Array<{ id: string }> };
    // The file is in completion order, and the two samples of row 1 run at once: compared as a set.
    expect([matches.matched, matches.rows.map((row) => row.id).sort()]).toEqual([2, ["1:0", "1:1"]]);
    const planned = py.trajectories.filter((t) => t.data_index !== 1);
    expect(planned.map((t) => t.segments.filter((s) => s.kind !== "prompt").map((s) => s.kind))).toEqual(
      planned.map(() => ["assistant", "user", "assistant", "tool", "assistant"]),
    );
  });
});

describe("a Python loop's failures end only its trajectory", () => {
  it("a raise fails the trajectory with the exception's last line; a crash of the host fails its trajectories, and the restarted host runs the rest", async () => {
    const loop = loopFile("moody.py", [
      "import os",
      "async def agent_loop(agent):",
      "    turn = await agent.generate()",
      "    row = agent.sample['data_index']",
      "    if row == 0:",
      "        raise ValueError(f'no plan for row {row}')",
      "    if row == 1 and agent.sample['sample_index'] == 0:",
      "        os._exit(9)",
      "    return turn.get('finish')",
      "",
    ].join("\n"));
    const data = await writeRows(f("moody.parquet"), ["moody", "moody", "moody"]);
    const run = await rollout("moody", data, [`agent_loops: {moody: ${loop}}`], ["max_concurrency: 1"]);
    expect(run.result.code).toBe(1);
    expect(run.trajectories.map((t) => [t.id, t.status, t.finish_reason])).toEqual([
      ["0:0", "failed", "agent_loop_error"],
      ["0:1", "failed", "agent_loop_error"],
      ["1:0", "failed", "agent_loop_error"],
      ["1:1", "completed", "stop"],
      ["2:0", "completed", "stop"],
      ["2:1", "completed", "stop"],
    ]);
    expect(run.trajectories[0]!.error).toBe("agent loop moody failed: ValueError: no plan for row 0");
    expect(run.trajectories[2]!.error).toMatch(/^agent loop moody failed: the Python agent loop host exited \(exit code 9\)/);
    expect(run.result.stderr).toContain("warning: the Python agent loop host of moody exited; starting it again");
    expect(run.trajectories.every((t) => t.assistant_turns === 1)).toBe(true);
  });

  it("a loop that hangs is cancelled at trajectory_timeout: aborted, deadline", async () => {
    const loop = loopFile("sleepy.py", [
      "import asyncio",
      "async def agent_loop(agent):",
      "    await agent.generate()",
      "    await asyncio.sleep(3600)",
      "",
    ].join("\n"));
    const data = await writeRows(f("sleepy.parquet"), ["sleepy"]);
    const run = await rollout("sleepy", data, [`agent_loops: {sleepy: ${loop}}`], ["trajectory_timeout: 1"]);
    expect(run.trajectories.map((t) => [t.status, t.finish_reason, t.assistant_turns])).toEqual([
      ["aborted", "deadline", 1],
      ["aborted", "deadline", 1],
    ]);
  });

  it("a primitive called wrongly raises in the loop, naming the argument", async () => {
    const loop = loopFile("clumsy.py", [
      "async def agent_loop(agent):",
      "    await agent.append([{'content': 'no role'}])",
      "",
    ].join("\n"));
    const data = await writeRows(f("clumsy.parquet"), ["clumsy"]);
    const run = await rollout("clumsy", data, [`agent_loops: {clumsy: ${loop}}`]);
    expect(run.trajectories[0]!.status).toBe("failed");
    expect(run.trajectories[0]!.error).toMatch(/^agent loop clumsy failed: PrimitiveError: append: bad arguments: messages\.0\.role/);
  });
});

describe("a Python loop that cannot load stops the run at start-up (exit 2), writing nothing", () => {
  const cases: Array<[string, string, string, RegExp]> = [
    ["missing function", "def helper():\n    pass\n", "#plan", /agent loop bad \(.*bad\.py#plan\): Python agent loop .*: no function or class plan; it defines: helper/],
    ["syntax error", "async def agent_loop(agent)\n    pass\n", "", /cannot import Python agent loop .*SyntaxError: .*bad\.py, line 1\)/],
    ["not async", "def agent_loop(agent):\n    pass\n", "", /agent_loop is a function, but not async/],
    ["verl AgentLoopBase class", "class AgentLoopBase:\n    pass\nclass Mine(AgentLoopBase):\n    async def run(self, sampling_params, **kwargs):\n        pass\n", "#Mine", /Mine is a verl AgentLoopBase class/],
  ];
  it.each(cases)("%s", async (_name, source, suffix, message) => {
    const loop = loopFile("bad.py", source);
    const data = await writeRows(f("bad.parquet"), ["bad"]);
    const run = await rollout("bad", data, [`agent_loops: {bad: "${loop}${suffix}"}`]);
    expect(run.result.code).toBe(2);
    expect(run.result.stderr).toMatch(message);
    expect(existsSync(run.out)).toBe(false);
  });
});
