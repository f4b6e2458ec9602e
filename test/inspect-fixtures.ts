/**
 * Real trajectory files for the inspect tests, written by the built `agentrl rollout` against the fake SGLang server
 * with the real Qwen3 tokenizer (the approach of rollout-e2e.test.ts). One run, tools and the simulated user together:
 *
 *   turn 0: the model calls calc_gsm8k_reward (ok), an unknown tool (tool error) and one call with bad JSON (parse
 *           error), all in one turn (max_parallel_calls=3);
 *   turn 1: it answers 17 without a call, so the interaction answers "incorrect" (an interaction turn);
 *   turn 2: it answers 18 and the interaction ends the trajectory.
 *
 * Prompt 0's answer is 18 (reward 1); prompts 1 and 2 get reward 0. Two samples per prompt: 6 trajectories. The JSONL
 * and the parquet file come from two runs of the same command, side by side against the one fake server.
 */
import { rmSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT, SHARED, runCli } from "./helpers/cli.js";
import { runCliInProcess } from "./helpers/in-process-cli.js";
import { IM_END, QWEN3_DIR } from "./helpers/qwen3.js";
import { startFakeSglang } from "./fake-sglang/index.js";
import { loadChatModel } from "../src/chat/index.js";
import { tempDir as tmp } from "./helpers/tmp.js";

export interface RolloutFixture {
  /** The trajectories as JSONL and as parquet (the same run written twice). */
  jsonl: string;
  parquet: string;
}

const GSM8K = path.join(SHARED, "datasets", "gsm8k");

export const TURN0_TEXT =
  'Let me check 17.\n<tool_call>\n{"name": "calc_gsm8k_reward", "arguments": {"answer": "17"}}\n</tool_call>\n' +
  '<tool_call>\n{"name": "lookup_table", "arguments": {"key": "eggs"}}\n</tool_call>\n' +
  '<tool_call>\n{"name": "calc_gsm8k_reward", "arguments": {"answer": 17,,}}\n</tool_call>';
export const TURN1_TEXT = "The answer is\n#### 17";
export const TURN2_TEXT = "Let me redo it: 16 - 3 - 4 = 9, 9 * 2 = 18.\n#### 18";

export async function makeRolloutFixture(): Promise<RolloutFixture> {
  const model = await loadChatModel(QWEN3_DIR);
  const imStart = model.tokenToId("<|im_start|>")!;
  const turns = [TURN0_TEXT, TURN1_TEXT, TURN2_TEXT].map((text) => [...model.encode(text), IM_END]);
  // system + user + assistant header = 3 <|im_start|>; each environment turn adds 2 (its own and the next header).
  const fake = await startFakeSglang({
    respond: (inputIds) => {
      const starts = inputIds.filter((id) => id === imStart).length;
      return turns[Math.min(2, (starts - 3) / 2)]!;
    },
  });
  const data = tmp("inspect-data");
  try {
    // The prompts (not under test here): preprocessed by the CLI's main() in the test process.
    const prep = await runCliInProcess(["preprocess", "gsm8k", "-i", GSM8K, "-o", data, "--split", "test", "--limit", "3", "--variant", "interaction"]);
    if (prep.code !== 0) throw new Error(`preprocess failed: ${prep.stderr}`);
    const outDir = tmp("inspect-out");
    const fixture = { jsonl: path.join(outDir, "traj.jsonl"), parquet: path.join(outDir, "traj.parquet") };
    // The two runs at once: the fake server's replies depend on the request alone.
    await Promise.all([fixture.jsonl, fixture.parquet].map(async (out) => {
      const result = await runCli([
        "rollout", "--data", path.join(data, "test.parquet"), "--model", QWEN3_DIR, "--server", fake.url,
        "--tools", path.join(REPO_ROOT, "tool-configs/gsm8k_tool_config.yaml"),
        "--interaction", path.join(REPO_ROOT, "interaction-configs/gsm8k_interaction_config.yaml"),
        "--set", "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=3",
        "--n", "2", "--concurrency", "1", "--out", out, "--json", "--quiet",
      ]);
      if (result.code !== 0) throw new Error(`rollout failed (${result.code}): ${result.stderr}`);
    }));
    return fixture;
  } finally {
    await fake.close();
    rmSync(data, { recursive: true, force: true });
  }
}
