import type { Command } from "commander";
import { notYetAvailable } from "./not-yet.js";

export function registerPreprocess(program: Command): void {
  const preprocess = program.command("preprocess").description("Turn raw datasets into parquet rows in verl's schema");
  preprocess
    .command("gsm8k")
    .description("GSM8K into train.parquet and test.parquet")
    .action(() => notYetAvailable("preprocess gsm8k", 2));
}
