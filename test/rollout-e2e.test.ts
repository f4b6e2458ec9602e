/**
 * `agentrl rollout` end to end, as a user runs it: the built CLI against the fake SGLang server, with the real Qwen3
 * tokenizer and chat template. The scripted model calls calc_gsm8k_reward with a wrong answer, reads the tool result,
 * then answers right (and the same story with the simulated user instead of the tool). The record must hold exactly
 * the tokens the engine saw and sampled, mask 1 on exactly the sampled tokens, the tool text and the rewards.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import path from "node:path";
import { REPO_ROOT, SHARED, runCli } from "./helpers/cli.js";
import { IM_END, QWEN3_DIR } from "./helpers/qwen3.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { loadChatModel, type ChatMessage, type ChatModel } from "../src/chat/index.js";
import { readTrajectories } from "../src/data/trajectory-store.js";
import type { Trajectory } from "../src/data/trajectory.js";
import { tempDir as tmp } from "./helpers/tmp.js";

const GSM8K = path.join(SHARED, "datasets", "gsm8k");

async function readAll(file: string): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for await (const t of readTrajectories(file)) out.push(t);
  return out.sort((a, b) => a.data_index - b.data_index || a.sample_index - b.sample_index);
}

/** Spans of consecutive equal mask values: [[mask, ids], ...]. */
function spans(ids: number[], mask: number[]): Array<[number, number[]]> {
  const out: Array<[number, number[]]> = [];
  ids.forEach((id, i) => {
    const last = out.at(-1);
    if (last && last[0] === mask[i]) last[1].push(id);
    else out.push([mask[i]!, [id]]);
  });
  return out;
}

let model: ChatModel;
let toolResponseId: number;
beforeAll(async () => {
  model = await loadChatModel(QWEN3_DIR);
  toolResponseId = model.tokenToId("<tool_response>")!;
});

/** How many environment turns the prompt already holds: tool responses, or user turns after the first assistant. */
function countOccurrences(ids: number[], id: number): number {
  return ids.filter((x) => x === id).length;
}

describe("rollout with the calc_gsm8k_reward tool", () => {
  let fake: FakeSglang;
  let turn1: number[];
  let turn2: number[];
  const data = tmp("rollout-data");
  const out = path.join(tmp("rollout-out"), "traj.jsonl");
  let result: Awaited<ReturnType<typeof runCli>>;

  beforeAll(async () => {
    turn1 = [
      ...model.encode('I think it is 17.\n<tool_call>\n{"name": "calc_gsm8k_reward", "arguments": {"answer": "17"}}\n</tool_call>'),
      IM_END,
    ];
    turn2 = [...model.encode("I was wrong: 16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\n#### 18"), IM_END];
    fake = await startFakeSglang({
      respond: (inputIds) => (countOccurrences(inputIds, toolResponseId) === 0 ? turn1 : turn2),
    });
    expect((await runCli(["preprocess", "gsm8k", "-i", GSM8K, "-o", data, "--split", "test", "--limit", "3"])).code).toBe(0);
    result = await runCli([
      "rollout", "--data", path.join(data, "test.parquet"), "--model", QWEN3_DIR, "--server", fake.url,
      "--tools", path.join(REPO_ROOT, "tool-configs/gsm8k_tool_config.yaml"), "--n", "2", "--out", out, "--json",
    ]);
  });
  afterAll(async () => fake?.close());

  it("exits 0 and summarises 6 trajectories", () => {
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout);
    expect(report.summary.count).toBe(6);
    expect(report.summary.byStatus).toEqual({ completed: 6 });
    expect(report.summary.toolCallsPerTrajectory).toBe(1);
  });

  it("records exactly the tokens the engine saw and sampled, with mask 1 exactly on the sampled tokens", async () => {
    const [first] = await readAll(out);
    const t = first!;
    // The prompt is the template render of the row's messages with the tool schema and the generation prompt.
    const messages = t.messages as ChatMessage[];
    const renderedPrompt = model.encode(
      model.render(messages.slice(0, 2), { tools: [toolSchema()], addGenerationPrompt: true }),
    );
    expect(t.prompt_ids).toEqual(renderedPrompt);
    // Mask-1 spans are the two scripted outputs, untouched, EOS included; one mask-0 span sits between them.
    const parts = spans(t.response_ids, t.response_mask);
    expect(parts.map(([m]) => m)).toEqual([1, 0, 1]);
    expect(parts[0]![1]).toEqual(turn1);
    expect(parts[2]![1]).toEqual(turn2);
    expect(model.decode(parts[1]![1])).toBe(
      "\n<|im_start|>user\n<tool_response>\nCurrent parsed answer='17' reward=0.0\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    );
    // What the server received on the second turn is the record up to that point, token for token.
    const generateBodies = fake.stats.log.filter((e) => e.path === "/generate").map((e) => e.body as { input_ids: number[] });
    const secondTurnInput = [...t.prompt_ids, ...t.response_ids.slice(0, t.response_ids.length - turn2.length)];
    expect(generateBodies.some((b) => JSON.stringify(b.input_ids) === JSON.stringify(secondTurnInput))).toBe(true);
    // Behaviour logprobs sit on sampled tokens only.
    t.response_mask.forEach((m, i) => {
      if (m === 0) expect(t.response_logprobs[i]).toBe(0);
    });
  });

  it("records the tool call, its text and the rewards with their parts", async () => {
    const [t] = await readAll(out);
    expect(t!.calls).toEqual([
      expect.objectContaining({ turn: 0, name: "calc_gsm8k_reward", arguments: { answer: "17" }, response: "Current parsed answer='17' reward=0.0", step_reward: -0.05, error_kind: null }),
    ]);
    expect(t!.reward).toBe(1);
    expect(t!.score).toBe(1);
    expect(t!.tool_rewards).toEqual([-0.05]);
    expect(t!.assistant_turns).toBe(2);
    expect(t!.user_turns).toBe(1);
    expect(t!.finish_reason).toBe("stop");
    expect(t!.segments.map((s) => s.kind)).toEqual(["assistant", "tool", "assistant"]);
    expect(t!.segments[1]).toMatchObject({ tool_name: "calc_gsm8k_reward" });
  });

  it("the other prompts, whose answer is not 18, get reward 0", async () => {
    const all = await readAll(out);
    expect(all.map((t) => t.id)).toEqual(["0:0", "0:1", "1:0", "1:1", "2:0", "2:1"]);
    expect(all.map((t) => t.reward)).toEqual([1, 1, 0, 0, 0, 0]);
    expect(new Set(all.map((t) => t.group_id))).toEqual(new Set(["0", "1", "2"]));
  });

  it("without a terminal and without --json, prints a progress line per tenth of the run", async () => {
    const progressOut = path.join(path.dirname(out), "progress.jsonl");
    const run = await runCli([
      "rollout", "--data", path.join(data, "test.parquet"), "--model", QWEN3_DIR, "--server", fake.url,
      "--tools", path.join(REPO_ROOT, "tool-configs/gsm8k_tool_config.yaml"), "--n", "4", "--out", progressOut,
    ]);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stderr.split("\n").filter((line) => / done \| reward /.test(line));
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.length).toBeLessThanOrEqual(10);
    expect(lines.at(-1)).toMatch(/^12\/12 done/);
  });
});

describe("rollout with the gsm8k interaction (simulated user)", () => {
  let fake: FakeSglang;
  let wrong: number[];
  let right: number[];
  const data = tmp("rollout-idata");
  const out = path.join(tmp("rollout-iout"), "traj.parquet");
  let result: Awaited<ReturnType<typeof runCli>>;

  beforeAll(async () => {
    wrong = [...model.encode("The answer is\n#### 17"), IM_END];
    right = [...model.encode("Let me redo it.\n#### 18"), IM_END];
    const imStart = model.tokenToId("<|im_start|>")!;
    fake = await startFakeSglang({
      // The system, user and first assistant headers give 3 <|im_start|>; each user turn adds 2 more.
      respond: (inputIds) => (countOccurrences(inputIds, imStart) <= 3 ? wrong : right),
    });
    expect((await runCli(["preprocess", "gsm8k", "-i", GSM8K, "-o", data, "--split", "test", "--limit", "1", "--variant", "interaction"])).code).toBe(0);
    result = await runCli([
      "rollout", "--data", path.join(data, "test.parquet"), "--model", QWEN3_DIR, "--server", fake.url,
      "--interaction", path.join(REPO_ROOT, "interaction-configs/gsm8k_interaction_config.yaml"), "--out", out, "--json",
    ]);
  });
  afterAll(async () => fake?.close());

  it("answers wrong, hears the user, answers right, and ends when the user says so", async () => {
    expect(result.code, result.stderr).toBe(0);
    const [t] = await readAll(out);
    const parts = spans(t!.response_ids, t!.response_mask);
    expect(parts.map(([m]) => m)).toEqual([1, 0, 1, 0]);
    expect(parts[0]![1]).toEqual(wrong);
    expect(parts[2]![1]).toEqual(right);
    expect(model.decode(parts[1]![1])).toBe(
      "\n<|im_start|>user\nYour response is incorrect! You need to reflect on your answer and try again.<|im_end|>\n<|im_start|>assistant\n",
    );
    expect(model.decode(parts[3]![1])).toContain("Your response is correct!");
    expect(t!.turn_scores).toEqual([0, 1]);
    expect(t!.finish_reason).toBe("interaction_done");
    expect(t!.reward).toBe(1);
    expect(t!.segments.map((s) => s.kind)).toEqual(["assistant", "user", "assistant", "user"]);
  });
});

function toolSchema() {
  return {
    type: "function",
    function: {
      name: "calc_gsm8k_reward",
      description:
        "A tool for calculating the reward of gsm8k. (1.0 if parsed answer is correct, 0.0 if parsed answer is incorrect or not correctly parsed)",
      parameters: {
        type: "object",
        properties: { answer: { type: "string", description: "The model's answer to the GSM8K math problem, must be a digits" } },
        required: ["answer"],
      },
    },
  };
}
