/** What the agent loop end-to-end tests share: rows that pick a loop by agent_name, and `agentrl rollout` on them. */
import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { runCli } from "./cli.js";
import { QWEN3_DIR } from "./qwen3.js";
import { GSM8K_TOOLS, readAllTrajectories } from "./rollout-run.js";
import { gsm8kArrowSchema, makeGsm8kRow } from "../../src/data/gsm8k.js";
import { writeParquetRows } from "../../src/data/parquet.js";

/** A dataset of "2 + 2?" rows, row i with agent_name names[i] (null: no agent_name). */
export async function writeAgentRows(file: string, names: Array<string | null>): Promise<string> {
  const rows = names.map((name, i) => ({ ...makeGsm8kRow({ question: "2 + 2?", answer: "#### 4" }, "4", "train", i, "tool"), agent_name: name }));
  await writeParquetRows(file, rows, gsm8kArrowSchema("tool"));
  return file;
}

/**
 * `agentrl rollout --n 2` on `data` with the GSM8K tool, `agent` as the YAML lines of actor_rollout_ref.rollout.agent
 * and `rollout` as more lines of actor_rollout_ref.rollout; the trajectories sorted by row and sample.
 */
export async function rolloutWithAgents(options: { dir: string; name: string; data: string; server: string; agent: string[]; rollout?: string[] }) {
  const { dir, name } = options;
  const config = path.join(dir, `${name}.yaml`);
  const indent = (lines: string[], spaces: number) => lines.map((line) => `${" ".repeat(spaces)}${line}`);
  writeFileSync(config, ["actor_rollout_ref:", "  rollout:", ...indent(options.rollout ?? [], 4), "    agent:", ...indent(options.agent, 6), ""].join("\n"));
  const out = path.join(dir, `${name}.jsonl`);
  const result = await runCli([
    "rollout", "--config", config, "--data", options.data, "--model", QWEN3_DIR, "--server", options.server,
    "--tools", GSM8K_TOOLS, "--n", "2", "--out", out, "--json",
  ]);
  const trajectories = existsSync(out) ? await readAllTrajectories(out) : [];
  trajectories.sort((a, b) => a.data_index - b.data_index || a.sample_index - b.sample_index);
  return { result, out, trajectories };
}
