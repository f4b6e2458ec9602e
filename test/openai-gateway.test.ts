/**
 * The OpenAI gateway end to end: `agentrl rollout` runs agents written against the OpenAI API (the official `openai`
 * npm and Python packages, LangChain's ChatOpenAI) as agent loops of kind `openai`, against the fake SGLang server
 * and the real Qwen3 tokenizer. For the same conversation the record must equal, token for token and mask for mask,
 * what the built-in tool_agent loop records; streaming must change nothing; a history the agent rewrites starts a
 * new segment; crashes, silent agents and bad requests fail only their trajectory.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import path from "node:path";
import { REPO_ROOT, VENV_PYTHON } from "./helpers/cli.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { rolloutWithAgents, writeAgentRows } from "./helpers/agent-loop-run.js";
import { tempDir, toolThenAnswer } from "./helpers/rollout-run.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { loadChatModel, type ChatModel } from "../src/chat/index.js";
import type { Trajectory } from "../src/data/trajectory.js";

const AGENTS = path.join(REPO_ROOT, "test/fixtures/openai-agents");
const dir = tempDir("openai-gateway");
const f = (name: string) => path.join(dir, name);

let model: ChatModel;
let fake: FakeSglang;
let rows: string;
let builtin: Trajectory[];

/** `agentrl rollout` with `loop` registered as agent loop `oa` and every row picking it. */
function rolloutWith(name: string, loop: Record<string, unknown>, data = rows) {
  return rolloutWithAgents({ dir, name, data, server: fake.url, agent: [`agent_loops: {oa: ${JSON.stringify(loop)}}`] });
}

const tokens = (t: Trajectory) => ({ prompt: t.prompt_ids, response: t.response_ids, mask: t.response_mask });

beforeAll(async () => {
  model = await loadChatModel(QWEN3_DIR);
  fake = await startFakeSglang({ respond: toolThenAnswer(model, () => "4") });
  rows = await writeAgentRows(f("rows.parquet"), ["oa", "oa"]);
  const reference = await rolloutWithAgents({ dir, name: "builtin", data: await writeAgentRows(f("builtin.parquet"), [null, null]), server: fake.url, agent: ["default_agent_loop: tool_agent"] });
  expect(reference.result.stderr + reference.result.code).toBe("0");
  builtin = reference.trajectories;
});
afterAll(async () => fake?.close());

describe.each([
  ["the openai npm package", { kind: "openai", command: ["node", `${AGENTS}/chat-agent.mjs`] }],
  ["the openai npm package, streaming", { kind: "openai", command: ["node", `${AGENTS}/chat-agent.mjs`, "--stream"] }],
])("an agent on %s", (label, loop) => {
  let run: Awaited<ReturnType<typeof rolloutWith>>;
  beforeAll(async () => {
    run = await rolloutWith(label.replace(/\W+/g, "-"), loop);
  });

  it("exits 0 with every trajectory completed and rewarded by the agent", () => {
    expect(run.result.stderr).toBe("");
    expect(run.result.code).toBe(0);
    expect(run.trajectories.map((t) => [t.status, t.finish_reason, t.reward, t.agent_loop])).toEqual(
      [0, 0, 1, 1].map(() => ["completed", "stop", 1, "oa"]),
    );
    expect(run.trajectories.map((t) => JSON.parse(t.reward_extra!))).toEqual([0, 0, 1, 1].map(() => ({ answer: "4" })));
  });

  it("records exactly the ids and mask the built-in tool_agent records for the same conversation", () => {
    expect(run.trajectories.map(tokens)).toEqual(builtin.map(tokens));
    expect(run.trajectories.map((t) => t.drift)).toEqual(builtin.map((t) => t.drift));
    expect(run.trajectories.every((t) => !t.context_segments?.length)).toBe(true);
  });
});
