import { Command, Option } from "commander";
import { anyInteger, positiveInt, probability } from "../flag-values.js";

interface Gsm8kFlags {
  input?: string;
  out: string;
  variant: "tool" | "interaction" | "plain";
  split: "train" | "test" | "all";
  limit?: number;
  force?: boolean;
  skipInvalid?: boolean;
  json?: boolean;
}

interface VaultFlags {
  out: string;
  trainRows: number;
  testRows: number;
  seed: number;
  demos?: number;
  demoAccuracy: number;
  force?: boolean;
  json?: boolean;
}

export function registerPreprocess(program: Command): void {
  const preprocess = program
    .command("preprocess")
    .description("Turn raw datasets into parquet rows in verl's schema");
  preprocess
    .command("gsm8k")
    .description("GSM8K into train.parquet and test.parquet, row for row as verl's multi-turn GSM8K scripts make them")
    .option("-i, --input <path>", "folder or file with raw GSM8K: JSON lines ({question, answer}) or HF parquet (main/train-00000-of-00001.parquet); downloads openai/gsm8k from the Hugging Face hub when absent")
    .option("-o, --out <dir>", "output folder for train.parquet and test.parquet", "data/gsm8k")
    .addOption(
      new Option("--variant <name>", "row schema: tool (gsm8k_multiturn_w_tool + agent_name), interaction (gsm8k_multiturn_w_interaction), plain (gsm8k.py)")
        .choices(["tool", "interaction", "plain"])
        .default("tool"),
    )
    .addOption(new Option("--split <name>", "which split(s) to write").choices(["train", "test", "all"]).default("all"))
    .option("--limit <n>", "keep only the first N valid rows of each split", positiveInt("--limit"))
    .option("--force", "overwrite existing output files")
    .option("--skip-invalid", "skip records without a '#### <answer>', with malformed JSON or missing fields, and report how many")
    .option("--json", "print the result as JSON instead of a table")
    .addHelpText(
      "after",
      `
Examples:
  $ agentrl preprocess gsm8k --input ../shared/datasets/gsm8k --out data/gsm8k
  $ agentrl preprocess gsm8k --variant interaction --out data/gsm8k_w_interaction
  $ agentrl preprocess gsm8k --split test --limit 100 --out data/gsm8k-small

Rows follow verl's schema: data_source, [agent_name,] prompt (list<struct<role, content>>), ability,
reward_model (struct), extra_info (struct with split, index, answer, question, tools_kwargs, interaction_kwargs).
Writes are atomic: a crash never leaves a half-written parquet file.`,
    )
    .action(async (flags: Gsm8kFlags) => {
      const { runPreprocessGsm8k } = await import("../../data/preprocess-command.js");
      await runPreprocessGsm8k(flags);
    });
  preprocess
    .command("vault")
    .description("The CPU demo's synthetic task: vaults with a hidden one-digit code that only the open_vault tool reveals")
    .option("-o, --out <dir>", "output folder for train.parquet and test.parquet", "data/vault")
    .option("--train-rows <n>", "rows of train.parquet", positiveInt("--train-rows"), 2000)
    .option("--test-rows <n>", "rows of test.parquet", positiveInt("--test-rows"), 100)
    .option("--seed <n>", "seed of the vault names and codes (same seed, same files)", anyInteger("--seed"), 0)
    .option("--demos <n>", "also write sft.jsonl: N demonstrations (call, tool answer, answer) for 'agentrl sft'", positiveInt("--demos"))
    .option("--demo-accuracy <p>", "the demonstrator answers the code with probability p, else misreads it as the next digit (4 -> 5)", probability("--demo-accuracy"), 1)
    .option("--force", "overwrite existing output files")
    .option("--json", "print the result as JSON instead of a table")
    .addHelpText(
      "after",
      `
Examples:
  $ agentrl preprocess vault --out data/vault
  $ agentrl preprocess vault --train-rows 500 --seed 3 --out /tmp/vault
  $ agentrl preprocess vault --demos 32 --out data/vault     # + sft.jsonl, the warm start's demonstrations
  $ agentrl preprocess vault --demos 1000 --demo-accuracy 0.3 --out examples/cpu-demo/data --force   # the CPU demo's files

Each row: a user prompt "what is the code of vault <name>?", reward_model.ground_truth = the code, and
extra_info.tools_kwargs.open_vault.create_kwargs.code = the code (tool-configs/vault_tool_config.yaml's tool reads it).
The built-in reward for data_source agentrl/vault is described in docs/cpu-demo.md.`,
    )
    .action(async (flags: VaultFlags) => {
      const { preprocessVault } = await import("../../data/vault.js");
      const { formatBytes, makeTable } = await import("../../term.js");
      const results = await preprocessVault({
        out: flags.out,
        trainRows: flags.trainRows,
        testRows: flags.testRows,
        seed: flags.seed,
        ...(flags.demos ? { demos: flags.demos, demoAccuracy: flags.demoAccuracy } : {}),
        force: flags.force ?? false,
      });
      if (flags.json) {
        process.stdout.write(`${JSON.stringify({ task: "vault", seed: flags.seed, splits: results }, null, 2)}\n`);
        return;
      }
      const table = makeTable(["split", "rows", "output", "size"]);
      for (const r of results) table.push([r.split, r.rows, r.output, formatBytes(r.bytes)]);
      process.stdout.write(`${table.toString()}\n`);
    });
}
