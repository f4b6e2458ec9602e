/**
 * The OpenAI gateway on the embedded engine: chat-agent.mjs (the official `openai` npm package; responses-agent.mjs,
 * the same package's Responses API, and agents-sdk-agent.mjs, the OpenAI Agents SDK's Runner, beside it) against a tiny
 * random-init Qwen3 with the real tokenizer, beside the built-in tool_agent on the same rows and seed. A random model
 * writes no tool call, so this checks the mechanics on a real engine: every trajectory ends completed or truncated,
 * mask 1 exactly on the sampled turn, and the record equals tool_agent's token for token (same prompt, greedy, so
 * the same sampled ids).
 */
import { beforeAll, describe, expect, it } from "vitest";
import path from "node:path";
import { writeFileSync } from "node:fs";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { writeAgentRows } from "./helpers/agent-loop-run.js";
import { GSM8K_TOOLS, readAllTrajectories } from "./helpers/rollout-run.js";
import { tinyQwenModel } from "./helpers/tiny-model.js";
import { tempDir } from "./helpers/tmp.js";
import type { Trajectory } from "../src/data/trajectory.js";

const AGENT = path.join(REPO_ROOT, "test/fixtures/openai-agents/chat-agent.mjs");
const RESPONSES_AGENT = path.join(REPO_ROOT, "test/fixtures/openai-agents/responses-agent.mjs");
const AGENTS_SDK_AGENT = path.join(REPO_ROOT, "test/fixtures/openai-agents/agents-sdk-agent.mjs");
const dir = tempDir("openai-gateway-emb");
const f = (name: string) => path.join(dir, name);

/**
 * `agentrl rollout --engine embedded` on four rows with the same prompt, row 0 picking the agent, row 1 the built-in
 * tool_agent, row 2 the Responses API agent and row 3 the Agents SDK's: n 2, greedy, 24 response tokens, one trajectory at a time. Alone in its batch, every generation is
 * computed the same way; the engine's batched logits differ from unbatched ones by float rounding, which on a random
 * model's nearly flat distribution moves inverse-CDF sampling to another token (docs/embedded-engine.md), so
 * trajectories sharing a batch could not be compared token for token.
 */
async function rollout() {
  const data = await writeAgentRows(f("rows.parquet"), ["oa", null, "oar", "oas"]);
  const config = f("config.yaml");
  writeFileSync(config, [
    "actor_rollout_ref:", "  rollout:", "    temperature: 0", "    max_concurrency: 1", "    agent:",
    `      agent_loops: {oa: {kind: openai, command: [node, "${AGENT}"]}, oar: {kind: openai, command: [node, "${RESPONSES_AGENT}", --top-logprobs]}, ` +
      `oas: {kind: openai, command: [node, "${AGENTS_SDK_AGENT}"]}}`, "",
  ].join("\n"));
  const out = f("t.jsonl");
  const result = await runCli(
    [
      "rollout", "--engine", "embedded", "--config", config, "--data", data, "--model", tinyQwenModel(), "--tools", GSM8K_TOOLS,
      "--n", "2", "--out", out, "--json", "--set", "data.max_response_length=24",
    ],
    { timeoutMs: 120_000 },
  );
  const trajectories = (await readAllTrajectories(out)).sort((a, b) => a.data_index - b.data_index || a.sample_index - b.sample_index);
  return {
    result,
    agent: trajectories.filter((t) => t.data_index === 0),
    builtin: trajectories.filter((t) => t.data_index === 1),
    responses: trajectories.filter((t) => t.data_index === 2),
    agentsSdk: trajectories.filter((t) => t.data_index === 3),
  };
}

const tokens = (t: Trajectory) => ({ prompt: t.prompt_ids, response: t.response_ids, mask: t.response_mask, logprobs: t.response_logprobs });

describe("an openai agent on the embedded engine", () => {
  let run: Awaited<ReturnType<typeof rollout>>;

  beforeAll(async () => {
    run = await rollout();
  }, 180_000);

  it("ends every trajectory completed or truncated, one sampled turn each", () => {
    expect(run.result.code, run.result.stderr).toBe(0);
    expect(run.agent).toHaveLength(2);
    for (const t of run.agent) {
      expect([["completed", "stop"], ["truncated", "length"]]).toContainEqual([t.status, t.finish_reason]);
      expect([t.agent_loop, t.assistant_turns, t.context_segments ?? []]).toEqual(["oa", 1, []]);
      // The agent's own report scores the episode, also when a length cut ended it before the agent did.
      expect([t.reward, t.reward_extra]).toEqual([0, { answer: null }]);
    }
  });

  it("puts mask 1 on the sampled turn only", () => {
    for (const t of run.agent) {
      // One turn: everything in the response was sampled, up to the end-of-turn token when it stopped.
      expect(t.response_ids.length).toBeGreaterThan(0);
      expect(t.response_mask).toEqual(t.response_ids.map(() => 1));
      expect(t.response_logprobs.every((p) => p < 0)).toBe(true);
    }
  });

  it("records what tool_agent records for the same prompt", () => {
    expect(run.builtin.map((t) => t.agent_loop)).toEqual(["tool_agent", "tool_agent"]);
    expect(run.agent.map(tokens)).toEqual(run.builtin.map(tokens));
    expect(run.agent.map((t) => [t.status, t.finish_reason, t.drift])).toEqual(run.builtin.map((t) => [t.status, t.finish_reason, t.drift]));
  });

  it("records the same for an agent on the Responses API", () => {
    expect(run.responses.map((t) => [t.agent_loop, t.assistant_turns])).toEqual([["oar", 1], ["oar", 1]]);
    expect(run.responses.map(tokens)).toEqual(run.builtin.map(tokens));
    expect(run.responses.map((t) => [t.status, t.finish_reason, t.drift])).toEqual(run.builtin.map((t) => [t.status, t.finish_reason, t.drift]));
  });

  it("gives the engine's two most likely tokens a position when the agent asks for top_logprobs", () => {
    for (const t of run.responses) {
      const entries = (t.reward_extra as { logprobs: Array<{ token: string; logprob: number; top_logprobs: Array<{ token: string; logprob: number }> }> }).logprobs;
      // Every sampled token of the text (the turn's end-of-turn token is no part of it), with the record's log-prob.
      expect(entries.length).toBeGreaterThan(0);
      expect(entries.map((e) => e.logprob)).toEqual(t.response_logprobs.slice(0, entries.length));
      for (const e of entries) {
        expect(e.top_logprobs).toHaveLength(2);
        // Greedy: the sampled token is the most likely one, with the same log-prob; the next is no more likely.
        expect(e.top_logprobs[0]!.token).toBe(e.token);
        expect(e.top_logprobs[0]!.logprob).toBeCloseTo(e.logprob, 5);
        expect(e.top_logprobs[1]!.logprob).toBeLessThanOrEqual(e.top_logprobs[0]!.logprob);
      }
    }
  });

  it("records the same for an agent on the OpenAI Agents SDK's Runner", () => {
    expect(run.agentsSdk.map((t) => [t.agent_loop, t.assistant_turns])).toEqual([["oas", 1], ["oas", 1]]);
    expect(run.agentsSdk.map(tokens)).toEqual(run.builtin.map(tokens));
    expect(run.agentsSdk.map((t) => [t.status, t.finish_reason, t.drift])).toEqual(run.builtin.map((t) => [t.status, t.finish_reason, t.drift]));
  });
});
