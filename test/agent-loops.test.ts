/**
 * Custom agent loops end to end: the built CLI against the fake SGLang server, with the real Qwen3 tokenizer. Rows
 * whose agent_name is plan_then_act run examples/agent-loops/plan-then-act.mjs (a plan turn, then the built-in tool
 * loop); the others run the default loop. The record must hold exactly the sampled tokens under mask 1 and nothing
 * else; an unknown agent_name stops the run before it starts (exit 2), and a loop that throws fails only its
 * trajectory.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { IM_END, QWEN3_DIR } from "./helpers/qwen3.js";
import { rolloutWithAgents, writeAgentRows } from "./helpers/agent-loop-run.js";
import { tempDir, toolThenAnswer } from "./helpers/rollout-run.js";
import { startFakeSglang, type FakeSglang, type RespondFn } from "./fake-sglang/index.js";
import { loadChatModel, type ChatModel } from "../src/chat/index.js";
import type { Trajectory } from "../src/data/trajectory.js";

const EXAMPLE = path.join(REPO_ROOT, "examples/agent-loops/plan-then-act.mjs");
const dir = tempDir("agent-loops");
const f = (name: string) => path.join(dir, name);

let model: ChatModel;
let fake: FakeSglang;
let example: { PLAN_PROMPT: string; ACT_PROMPT: string };
let planIds: number[];

const writeRows = writeAgentRows;

/** `agentrl rollout` on `data` with the given agent loops registered; the trajectories sorted by row and sample. */
const rollout = (name: string, data: string, loops: Record<string, string>) =>
  rolloutWithAgents({ dir, name, data, server: fake.url, agent: [`agent_loops: ${JSON.stringify(loops)}`] });

/** The response's turns: [segment kind, its token ids], prompt left out. */
function turns(t: Trajectory): Array<[string, number[]]> {
  return t.segments.filter((s) => s.kind !== "prompt").map((s) => [s.kind, t.response_ids.slice(s.start, s.end)]);
}

/** Mask 1 exactly on the tokens of assistant segments. */
function expectMaskOnSampledOnly(t: Trajectory): void {
  const expected = new Array<number>(t.response_ids.length).fill(0);
  for (const s of t.segments) if (s.kind === "assistant") expected.fill(1, s.start, s.end);
  expect(t.response_mask).toEqual(expected);
  expect(t.segments.filter((s) => s.kind !== "prompt").at(-1)!.end).toBe(t.response_ids.length);
}

beforeAll(async () => {
  model = await loadChatModel(QWEN3_DIR);
  example = (await import(EXAMPLE)) as typeof example;
  planIds = [...model.encode("1. Add 2 and 2.\n2. Check the sum with the tool."), IM_END];
  const act = toolThenAnswer(model, () => "4");
  const respond: RespondFn = (ids, params, ctx) => {
    const text = model.decode(ids);
    return text.includes(example.PLAN_PROMPT) && !text.includes(example.ACT_PROMPT) ? planIds : act(ids, params, ctx);
  };
  fake = await startFakeSglang({ respond });
});
afterAll(async () => fake?.close());

describe("plan_then_act (examples/agent-loops/plan-then-act.mjs) beside the default loop", () => {
  let run: Awaited<ReturnType<typeof rollout>>;
  const names = ["plan_then_act", null, "tool_agent", "plan_then_act"];
  beforeAll(async () => {
    run = await rollout("plan", await writeRows(f("plan.parquet"), names), { plan_then_act: EXAMPLE });
  });

  it("exits 0 with every trajectory completed and rewarded", () => {
    expect(run.result.stderr).toBe("");
    expect(run.result.code).toBe(0);
    expect(run.trajectories.map((t) => [t.data_index, t.status, t.finish_reason, t.reward])).toEqual(
      [0, 0, 1, 1, 2, 2, 3, 3].map((row) => [row, "completed", "stop", 1]),
    );
  });

  it("agent_name plan_then_act runs the plan turn, the act prompt, then the tool loop", () => {
    const encode = (text: string) => [...model.encode(text), IM_END];
    const call = encode('<tool_call>\n{"name": "calc_gsm8k_reward", "arguments": {"answer": "4"}}\n</tool_call>');
    for (const t of run.trajectories.filter((t) => names[t.data_index] === "plan_then_act")) {
      expect(model.decode(t.prompt_ids)).toContain(example.PLAN_PROMPT);
      const kinds = turns(t);
      expect(kinds.map(([kind]) => kind)).toEqual(["assistant", "user", "assistant", "tool", "assistant"]);
      expect(kinds.filter(([kind]) => kind === "assistant").map(([, ids]) => ids)).toEqual([planIds, call, encode("#### 4")]);
      expect(model.decode(kinds[1]![1])).toContain(example.ACT_PROMPT);
      expect(t.assistant_turns).toBe(3);
      expect(t.tool_calls).toBe(1);
      expectMaskOnSampledOnly(t);
    }
  });

  it("rows without agent_name, or with tool_agent, run the default tool loop", () => {
    const defaults = run.trajectories.filter((t) => names[t.data_index] !== "plan_then_act");
    expect(defaults).toHaveLength(4);
    for (const t of defaults) {
      expect(model.decode(t.prompt_ids)).not.toContain(example.PLAN_PROMPT);
      expect(turns(t).map(([kind]) => kind)).toEqual(["assistant", "tool", "assistant"]);
      expectMaskOnSampledOnly(t);
    }
  });
});

describe("agent loop errors", () => {
  it("an unknown agent_name exits 2 naming the row and the registered loops, with nothing written", async () => {
    const data = await writeRows(f("unknown.parquet"), [null, "nope"]);
    const { result, out } = await rollout("unknown", data, { plan_then_act: EXAMPLE });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`row 1: agent_name "nope" is not a registered agent loop`);
    expect(result.stderr).toContain("registered: tool_agent, single_turn_agent, plan_then_act");
    expect(existsSync(out)).toBe(false);
  });

  it("agentrl train refuses an unknown agent_name the same way, before its run folder exists", async () => {
    const data = await writeRows(f("train-unknown.parquet"), [null, "nope"]);
    const config = f("train.yaml");
    writeFileSync(config, [
      "data:", `  train_files: ${data}`, "  train_batch_size: 1", "actor_rollout_ref:", "  model:", `    path: ${QWEN3_DIR}`,
      "trainer:", "  total_training_steps: 1", `  default_local_dir: ${f("run")}`, "",
    ].join("\n"));
    const result = await runCli(["train", "--config", config]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`${data}: row 1: agent_name "nope" is not a registered agent loop (registered: tool_agent, single_turn_agent)`);
    expect(existsSync(f("run"))).toBe(false);
  });

  it("a loop that throws fails its trajectory with the error; the other rows run on", async () => {
    const broken = f("broken.mjs");
    writeFileSync(broken, 'export default async function (agent) {\n  await agent.generate();\n  throw new Error("no plan today");\n}\n');
    const data = await writeRows(f("broken.parquet"), ["broken", null]);
    const { result, trajectories } = await rollout("broken", data, { broken });
    expect(result.code).toBe(1);
    expect(trajectories.map((t) => [t.data_index, t.status, t.finish_reason])).toEqual([
      [0, "failed", "agent_loop_error"],
      [0, "failed", "agent_loop_error"],
      [1, "completed", "stop"],
      [1, "completed", "stop"],
    ]);
    expect(trajectories[0]!.error).toBe("agent loop broken failed: no plan today");
    // What it sampled before it threw stays in the record, under mask 1.
    expect(trajectories[0]!.assistant_turns).toBe(1);
    expectMaskOnSampledOnly(trajectories[0]!);
  });

  it("a module without a loop export exits 2 naming the module and its exports", async () => {
    const empty = f("empty.mjs");
    writeFileSync(empty, "export function helper() {}\n");
    const data = await writeRows(f("empty.parquet"), [null]);
    const { result } = await rollout("empty", data, { empty });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("agent loop empty");
    expect(result.stderr).toContain("it exports helper");
  });
});
