/**
 * `workers`: a Python function agent's trajectories shared by several host processes (src/gateway/python-agent-host.ts),
 * each trajectory run by the host with the fewest running; and what the key accepts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import path from "node:path";
import { REPO_ROOT, VENV_PYTHON } from "./helpers/cli.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { rolloutWithAgents, writeAgentRows } from "./helpers/agent-loop-run.js";
import { tempDir, toolThenAnswer } from "./helpers/rollout-run.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { loadChatModel } from "../src/chat/index.js";
import { openaiAgentSchema } from "../src/rollout/config.js";
import { defaultAgentWorkers } from "../src/gateway/python-agent-host.js";

const AGENT = path.join(REPO_ROOT, "test/fixtures/openai-agents/chat_agent.py");
const dir = tempDir("openai-gateway-workers");

describe("a Python function agent with workers: 2", () => {
  let fake: FakeSglang;
  let run: Awaited<ReturnType<typeof rolloutWithAgents>>;

  beforeAll(async () => {
    const model = await loadChatModel(QWEN3_DIR);
    fake = await startFakeSglang({ respond: toolThenAnswer(model, () => "4") });
    const data = await writeAgentRows(path.join(dir, "rows.parquet"), ["pooled", "pooled", "pooled"]);
    const loop = { kind: "openai", function: `${AGENT}#agent_with_host`, python: VENV_PYTHON, workers: 2 };
    run = await rolloutWithAgents({ dir, name: "workers", data, server: fake.url, agent: [`agent_loops: ${JSON.stringify({ pooled: loop })}`] });
  });
  afterAll(async () => fake?.close());

  it("runs the trajectories in flight on both hosts, each trajectory as one host runs it", () => {
    expect(run.result.code).toBe(0);
    expect(run.trajectories.map((t) => [t.status, t.reward, t.assistant_turns])).toEqual(Array.from({ length: 6 }, () => ["completed", 1, 2]));
    const hosts = new Set(run.trajectories.map((t) => (t.reward_extra as { host: number }).host));
    expect(hosts.size).toBe(2);
  });
});

describe("the workers key", () => {
  const agent = (fields: Record<string, unknown>) => openaiAgentSchema.safeParse({ kind: "openai", ...fields });

  it("takes a positive count for a Python function agent; a command or a JS function is refused, naming workers", () => {
    expect(agent({ function: "agent.py#run", workers: 3 }).data?.workers).toBe(3);
    expect(agent({ function: "agent.py" }).data?.workers).toBeNull();
    for (const fields of [{ command: ["node", "agent.mjs"], workers: 2 }, { function: "agent.mjs#run", workers: 2 }]) {
      const parsed = agent(fields);
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues.map((issue) => [issue.path.join("."), issue.message.split(":")[0]])).toEqual([["workers", "workers is for Python function agents (function"]]);
    }
    expect(agent({ function: "agent.py", workers: 0 }).success).toBe(false);
  });

  it("defaults to one host per 4 cores, at least 1 and at most 8", () => {
    expect([1, 2, 4, 7, 8, 16, 32, 64, 128].map((cores) => defaultAgentWorkers(cores))).toEqual([1, 1, 1, 1, 2, 4, 8, 8, 8]);
  });
});
