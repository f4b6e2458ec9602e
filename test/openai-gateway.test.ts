/**
 * The OpenAI gateway end to end: `agentrl rollout` runs agents written against the OpenAI API (the official `openai`
 * npm and Python packages, on chat completions and on the Responses API, LangChain's ChatOpenAI, the OpenAI Agents
 * SDK's Runner) as agent loops of kind `openai`, against the fake SGLang server
 * and the real Qwen3 tokenizer. For the same conversation the record must equal, token for token and mask for mask,
 * what the built-in tool_agent loop records; streaming must change nothing. openai-gateway-faults.test.ts has the
 * faults and edges (crashes, silent agents, rewritten histories, bad requests, deadlines), openai-gateway-embedded
 * the same agent on a real (tiny) model.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import path from "node:path";
import { REPO_ROOT, VENV_PYTHON } from "./helpers/cli.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { rolloutWithAgents, writeAgentRows } from "./helpers/agent-loop-run.js";
import { tempDir, toolThenAnswer } from "./helpers/rollout-run.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { loadChatModel } from "../src/chat/index.js";
import type { Trajectory } from "../src/data/trajectory.js";

const AGENTS = path.join(REPO_ROOT, "test/fixtures/openai-agents");
const dir = tempDir("openai-gateway");

/** The agents, each registered as an agent loop of its own and picked by one row. */
const AGENT_LOOPS: Array<[label: string, name: string, loop: Record<string, unknown>]> = [
  ["the openai npm package", "npm", { kind: "openai", command: ["node", `${AGENTS}/chat-agent.mjs`] }],
  ["the openai npm package, streaming", "npm_stream", { kind: "openai", command: ["node", `${AGENTS}/chat-agent.mjs`, "--stream"] }],
  ["the openai Python package", "py", { kind: "openai", command: [VENV_PYTHON, `${AGENTS}/chat_agent.py`] }],
  ["the openai Python package, streaming", "py_stream", { kind: "openai", command: [VENV_PYTHON, `${AGENTS}/chat_agent.py`, "--stream"] }],
  ["the openai Python package, as a function", "py_fn", { kind: "openai", function: `${AGENTS}/chat_agent.py#agent`, python: VENV_PYTHON }],
  ["the openai Python package, as an async function streaming", "py_async", { kind: "openai", function: `${AGENTS}/chat_agent.py#agent_async`, python: VENV_PYTHON }],
  ["the openai npm package's Responses API", "npm_responses", { kind: "openai", command: ["node", `${AGENTS}/responses-agent.mjs`] }],
  ["the openai npm package's Responses API, streaming", "npm_responses_stream", { kind: "openai", command: ["node", `${AGENTS}/responses-agent.mjs`, "--stream"] }],
  ["the openai Python package's Responses API", "py_responses", { kind: "openai", command: [VENV_PYTHON, `${AGENTS}/responses_agent.py`] }],
  ["the openai Python package's Responses API, streaming", "py_responses_stream", { kind: "openai", command: [VENV_PYTHON, `${AGENTS}/responses_agent.py`, "--stream"] }],
  ["the openai npm package's Responses API, chained by previous_response_id", "npm_responses_chain", { kind: "openai", command: ["node", `${AGENTS}/responses-agent.mjs`, "--chain"] }],
  ["the openai Python package's Responses API, streaming, chained by previous_response_id", "py_responses_chain", { kind: "openai", command: [VENV_PYTHON, `${AGENTS}/responses_agent.py`, "--stream", "--chain"] }],
  ["the openai Python package's Responses API, as a function", "py_responses_fn", { kind: "openai", function: `${AGENTS}/responses_agent.py#agent`, python: VENV_PYTHON }],
  ["LangChain's ChatOpenAI", "langchain", { kind: "openai", command: ["node", `${AGENTS}/langchain-agent.mjs`] }],
  ["LangChain's ChatOpenAI, streaming", "langchain_stream", { kind: "openai", command: ["node", `${AGENTS}/langchain-agent.mjs`, "--stream"] }],
  ["LangChain's ChatOpenAI on the Responses API", "langchain_responses", { kind: "openai", command: ["node", `${AGENTS}/langchain-agent.mjs`, "--responses"] }],
  ["LangChain's ChatOpenAI on the Responses API, streaming", "langchain_responses_stream", { kind: "openai", command: ["node", `${AGENTS}/langchain-agent.mjs`, "--responses", "--stream"] }],
  ["the OpenAI Agents SDK (JS), its Runner on the Responses API", "agents_sdk", { kind: "openai", command: ["node", `${AGENTS}/agents-sdk-agent.mjs`] }],
  ["the OpenAI Agents SDK (JS), its Runner streaming", "agents_sdk_stream", { kind: "openai", command: ["node", `${AGENTS}/agents-sdk-agent.mjs`, "--stream"] }],
  ["the openai npm package, inside bubblewrap", "npm_bwrap", { kind: "openai", command: ["node", `${AGENTS}/chat-agent.mjs`], sandbox: "bwrap" }],
  ["the openai Python package, as a function inside bubblewrap", "py_fn_bwrap", { kind: "openai", function: `${AGENTS}/chat_agent.py#agent`, python: VENV_PYTHON, sandbox: "bwrap" }],
];

/** An agent whose sub-agent detours through a conversation of its own: its main record is compared on its own (below). */
const DETOUR: [string, Record<string, unknown>] = ["detour", { kind: "openai", function: `${AGENTS}/js-agents.mjs#subAgentDetour` }];

let fake: FakeSglang;
let run: Awaited<ReturnType<typeof rolloutWithAgents>>;
/** The built-in tool_agent's record of the same conversation (row 0). */
let builtin: Trajectory[];

const tokens = (t: Trajectory) => ({ prompt: t.prompt_ids, response: t.response_ids, mask: t.response_mask, logprobs: t.response_logprobs });

// One run for every agent: row 0 on the built-in tool_agent, then one row per agent, all with the same question (so
// the same conversation), n 2. The fake model's reply depends only on the tokens it is sent.
beforeAll(async () => {
  const model = await loadChatModel(QWEN3_DIR);
  fake = await startFakeSglang({ respond: toolThenAnswer(model, () => "4") });
  const data = await writeAgentRows(path.join(dir, "rows.parquet"), [null, ...AGENT_LOOPS.map(([, name]) => name), DETOUR[0]]);
  const loops = Object.fromEntries([...AGENT_LOOPS.map(([, name, loop]) => [name, loop] as const), DETOUR]);
  run = await rolloutWithAgents({ dir, name: "agents", data, server: fake.url, agent: ["default_agent_loop: tool_agent", `agent_loops: ${JSON.stringify(loops)}`] });
  builtin = run.trajectories.filter((t) => t.data_index === 0);
});
afterAll(async () => fake?.close());

it("runs every agent beside tool_agent: exit 0, nothing on stderr (no note about ignored fields), every row recorded", () => {
  expect(run.result.stderr).toBe("");
  expect(run.result.code).toBe(0);
  expect(run.trajectories.map((t) => [t.data_index, t.agent_loop])).toEqual(
    ["tool_agent", ...AGENT_LOOPS.map(([, name]) => name), DETOUR[0]].flatMap((name, i) => [[i, name], [i, name]]),
  );
  expect(builtin.map((t) => [t.status, t.finish_reason, t.reward, t.assistant_turns])).toEqual([0, 1].map(() => ["completed", "stop", 1, 2]));
});

describe.each(AGENT_LOOPS.map(([label, name], i) => [label, name, i + 1] as const))("an agent on %s", (_label, name, row) => {
  const trajectories = () => {
    const mine = run.trajectories.filter((t) => t.data_index === row);
    expect(mine.map((t) => t.agent_loop)).toEqual([name, name]);
    return mine;
  };

  it("completes every trajectory, rewarded by the agent", () => {
    expect(trajectories().map((t) => [t.status, t.finish_reason, t.reward, t.error])).toEqual([0, 1].map(() => ["completed", "stop", 1, null]));
    expect(trajectories().map((t) => t.reward_extra)).toEqual([0, 1].map(() => ({ answer: "4" })));
  });

  it("records exactly the ids, mask and logprobs the built-in tool_agent records for the same conversation", () => {
    expect(trajectories().map(tokens)).toEqual(builtin.map(tokens));
    expect(trajectories().map((t) => [t.drift, t.assistant_turns, t.context_segments ?? []])).toEqual(builtin.map((t) => [t.drift, t.assistant_turns, []]));
  });

  it("records the calls the agent ran itself, with their results, as tool_agent records its own", () => {
    const call = (t: Trajectory) => t.calls.map((c) => [c.turn, c.name, c.arguments, c.response]);
    expect(trajectories().map(call)).toEqual(builtin.map(call));
    expect(trajectories().map((t) => t.tool_calls)).toEqual([1, 1]);
    const toolSegment = (t: Trajectory) => t.segments.filter((s) => s.kind === "tool").map((s) => [s.tool_name, s.arguments]);
    expect(trajectories().map(toolSegment)).toEqual(builtin.map(toolSegment));
  });
});

describe("an agent whose sub-agent has a conversation of its own between two turns", () => {
  const trajectories = () => run.trajectories.filter((t) => t.agent_loop === DETOUR[0]);

  it("goes back to its main record: exactly tool_agent's, the sub-agent's turn kept as a segment of its own", () => {
    expect(trajectories().map((t) => [t.status, t.reward, t.reward_extra])).toEqual([0, 1].map(() => ["completed", 1, { answer: "4", checked: "stop" }]));
    expect(trajectories().map(tokens)).toEqual(builtin.map(tokens));
    for (const t of trajectories()) {
      expect(t.context_segments?.map((segment) => [segment.reason, (segment.messages as Array<{ role: string }>).map((m) => m.role)])).toEqual([
        ["tools_changed", ["system", "user", "assistant"]],
      ]);
    }
    const call = (t: Trajectory) => t.calls.map((c) => [c.turn, c.name, c.arguments, c.response]);
    expect(trajectories().map(call)).toEqual(builtin.map(call));
  });
});
