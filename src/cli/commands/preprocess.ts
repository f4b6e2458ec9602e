import { Command, Option } from "commander";
import { UsageError } from "../../errors.js";

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

function parseLimit(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`--limit must be a positive integer, got '${value}'`);
  return n;
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
    .option("--limit <n>", "keep only the first N valid rows of each split", parseLimit)
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
      const { runPreprocessGsm8k } = await import("../preprocess-gsm8k-view.js");
      await runPreprocessGsm8k(flags);
    });
}
