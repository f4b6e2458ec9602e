/**
 * What a verl user brings, together, on the embedded engine (a real tiny random-init model behind SGLang's API, the
 * real Qwen3 tokenizer): verl's gsm8k tool class in Python (the tool host), a Python reward function returning a dict
 * and reading the tools' scores from extra_info["rollout_reward_scores"] (the reward pool), and a Python agent loop (the agent loop host) that samples a short first turn, checks the row's
 * answer with the tool itself, then samples again. A random model never writes a tool call, so the loop makes it:
 * every part runs in every trajectory, and the record must show each one's work with masks on sampled tokens only.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { cpSync, writeFileSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { GSM8K_DIR, readAllTrajectories } from "./helpers/rollout-run.js";
import { tinyQwenModel } from "./helpers/tiny-model.js";
import { tempDir } from "./helpers/tmp.js";
import type { Trajectory } from "../src/data/trajectory.js";

const LOOP = `
async def check_then_answer(agent):
    first = await agent.generate(max_new_tokens=4)
    if first.get("finish"):
        return first["finish"]
    answer = agent.sample["ground_truth"]
    ended = await agent.call_tools([{"name": "calc_gsm8k_reward", "arguments": {"answer": answer}}])
    if ended:
        return ended
    second = await agent.generate(max_new_tokens=4)
    return second.get("finish") or {"status": "completed", "reason": "stop"}
`;

/** A verl reward that reads the tools' calc_reward from extra_info["rollout_reward_scores"], as verl passes them. */
const REWARD = `
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    tool_scores = extra_info["rollout_reward_scores"]
    return {"score": tool_scores["calc_gsm8k_reward"], "acc": False, "index": extra_info["index"], "seen": sorted(tool_scores)}
`;

const TOOLS = `tools:
  - class_name: gsm8k_tool.py#Gsm8kTool
    config: {type: native}
    tool_schema:
      type: function
      function:
        name: calc_gsm8k_reward
        description: checks an answer
        parameters: {type: object, properties: {answer: {type: string}}, required: [answer]}
`;

describe("a Python tool, reward and agent loop on the embedded engine", () => {
  const dir = tempDir("verl-ext-emb");
  let result: Awaited<ReturnType<typeof runCli>>;
  let all: Trajectory[] = [];

  beforeAll(async () => {
    expect((await runCli(["preprocess", "gsm8k", "-i", GSM8K_DIR, "-o", dir, "--split", "test", "--limit", "2"])).code).toBe(0);
    cpSync(path.join(REPO_ROOT, "test/fixtures/python-tools/gsm8k_tool.py"), path.join(dir, "gsm8k_tool.py"));
    writeFileSync(path.join(dir, "reward.py"), REWARD);
    writeFileSync(path.join(dir, "tools.yaml"), TOOLS);
    writeFileSync(path.join(dir, "loop.py"), LOOP);
    writeFileSync(path.join(dir, "config.yaml"), [
      // The rows agentrl preprocess writes name tool_agent: the user's loop takes the built-in's place.
      "actor_rollout_ref:", "  rollout:", "    agent:",
      `      agent_loops: {tool_agent: "${path.join(dir, "loop.py")}#check_then_answer"}`,
      "custom_reward_function:", `  path: ${path.join(dir, "reward.py")}`, "",
    ].join("\n"));
    const out = path.join(dir, "t.jsonl");
    result = await runCli(
      [
        "rollout", "--engine", "embedded", "--config", path.join(dir, "config.yaml"), "--data", path.join(dir, "test.parquet"),
        "--model", tinyQwenModel(), "--tools", path.join(dir, "tools.yaml"), "--n", "2", "--out", out, "--json", "--seed", "5",
        "--set", "data.max_response_length=256",
      ],
      { timeoutMs: 240_000 },
    );
    all = (await readAllTrajectories(out)).sort((a, b) => a.data_index - b.data_index || a.sample_index - b.sample_index);
  }, 300_000);

  it("completes every trajectory through the loop, with no error", () => {
    expect(result.stderr).not.toMatch(/error|warning/i);
    expect(result.code).toBe(0);
    expect(all.map((t) => [t.id, t.status, t.agent_loop, t.assistant_turns]), JSON.stringify(all.map((t) => [t.finish_reason, t.error, t.segments.map((s) => [s.kind, s.end - s.start])]))).toEqual(
      ["0:0", "0:1", "1:0", "1:1"].map((id) => [id, "completed", "tool_agent", 2]),
    );
  });

  it("ran verl's gsm8k tool in Python with the row's create_kwargs: the true answer scores 1, and calc_reward says so", () => {
    for (const t of all) {
      expect(t.calls.map((c) => [c.name, c.response, c.error_kind ?? null])).toEqual([
        ["calc_gsm8k_reward", `Current parsed answer='${t.ground_truth}' reward=1.0`, null],
      ]);
      expect(t.tool_scores).toEqual({ calc_gsm8k_reward: 1 });
    }
  });

  it("scored every trajectory with the Python reward function, which saw the tool scores; its extra keys recorded", () => {
    for (const t of all) {
      const extra = t.reward_extra!;
      expect([t.reward, extra["acc"], extra["index"], extra["seen"]]).toEqual([1, false, t.data_index, ["calc_gsm8k_reward"]]);
    }
  });

  it("keeps mask 1 on the engine's sampled tokens only, with its logprobs", () => {
    for (const t of all) {
      const kinds = t.segments.filter((s) => s.kind !== "prompt").map((s) => [s.kind, s.end - s.start]);
      expect(kinds.map(([kind]) => kind)).toEqual(["assistant", "tool", "assistant"]);
      const expected = new Array<number>(t.response_ids.length).fill(0);
      for (const s of t.segments) if (s.kind === "assistant") expected.fill(1, s.start, s.end);
      expect(t.response_mask).toEqual(expected);
      expect(t.response_logprobs.every((lp, i) => (expected[i] === 1 ? lp < 0 : lp === 0))).toBe(true);
    }
  });
});
