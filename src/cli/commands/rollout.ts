import { Command, Option } from "commander";
import { collect, nonNegativeNumber, positiveInt } from "../flag-values.js";
import type { RolloutFlags } from "../../rollout/command.js";

export function registerRollout(program: Command): void {
  program
    .command("rollout")
    .description("Run asynchronous multi-turn rollouts against SGLang servers and write token-level trajectories")
    .option("-c, --config <file>", "rollout config YAML (verl key names); flags override it")
    .option("-d, --data <file>", "dataset parquet in verl's schema (data.path)")
    .option("-m, --model <dir|id>", "model folder with tokenizer.json and the chat template, or a Hugging Face Hub id org/name[@revision] resolved through its cache (actor_rollout_ref.model.path)")
    .option("-s, --server <url>", "SGLang server or router URL; repeat for several servers", collect)
    .addOption(
      new Option("--engine <name>", "embedded: start agentrl's own engine on --model (CPU or GPU) for this run instead of --server").choices(["embedded", "sglang"]),
    )
    .option("--tools <yaml>", "tool config in verl's format (multi_turn.tool_config_path)")
    .option("--interaction <yaml>", "interaction config in verl's format (multi_turn.interaction_config_path)")
    .option("-n, --n <n>", "samples per prompt (rollout.n)", positiveInt("--n"))
    .option("--concurrency <c>", "trajectories in flight at once (rollout.max_concurrency)", positiveInt("--concurrency"))
    .option(
      "--threads <n>",
      "worker threads running the trajectories (rollout.threads, default 1); raise it when agentrl's own CPU is the limit " +
        "(near 100% of a core while the servers are not busy), e.g. --threads 4 on a 4-core client; --concurrency stays the total",
      positiveInt("--threads"),
    )
    .option("--limit <n>", "use only the first N prompts (data.limit)", positiveInt("--limit"))
    .option("-o, --out <file>", "trajectory file, .parquet or .jsonl (output.path)")
    .option("--format <parser>", "function-call format: auto, qwen25, hermes, llama3, mistral, deepseekv3, pythonic, gpt-oss")
    .option("--temperature <t>", "sampling temperature; 0 = greedy", nonNegativeNumber("--temperature"))
    .option("--max-turns <n>", "most assistant turns per trajectory (multi_turn.max_assistant_turns)", positiveInt("--max-turns"))
    .option("--reward <module>", "JS module or .py file with the reward function (custom_reward_function.path)")
    .option("--reward-name <name>", "the module's exported reward function; default compute_score, or computeScore / a default export (custom_reward_function.name)")
    .option("--seed <n>", "seed for per-request sampling seeds", (v) => Number.parseInt(v, 10))
    .option(
      "--over-sample-rate <r>",
      "abort the running trajectories once (1 - r) of them have finished, e.g. 0.1 (rollout.over_sample_rate)",
      nonNegativeNumber("--over-sample-rate"),
    )
    .option("--set <key=value>", "override any config key, e.g. --set actor_rollout_ref.rollout.multi_turn.max_user_turns=3", collect)
    .option("--api-key <key>", "API key of the servers (prefer the SGLANG_API_KEY environment variable: flags show in ps)")
    .option("--resume", "continue an --out file: finished trajectories are kept, failed ones (a server error after every retry, a reward that threw) are redone")
    .option("--keep-failed", "with --resume: keep failed trajectories as they are, do not redo them")
    .option("--force", "replace an existing --out file")
    .option("--dry-run", "print the effective config and what it implies, then exit")
    .option("--json", "print the closing summary as JSON on stdout")
    .option("-q, --quiet", "no live progress")
    .addHelpText(
      "after",
      `
Examples:
  $ agentrl rollout --data data/gsm8k/test.parquet --model ./Qwen2.5-3B-Instruct \\
      --server http://127.0.0.1:30000 --tools tool-configs/gsm8k_tool_config.yaml --n 4 --out out/rollout.parquet
  $ agentrl rollout --config rollout.yaml --set actor_rollout_ref.rollout.n=8 --dry-run
  $ agentrl rollout --config rollout.yaml --resume        # after a crash, Ctrl-C or failures: no duplicates, nothing lost
  $ agentrl rollout --config rollout.yaml --resume --keep-failed   # the same, leaving failed trajectories as they are
  $ agentrl rollout --config rollout.yaml --over-sample-rate 0.1   # stop waiting once 90% have finished
  $ agentrl rollout --config rollout.yaml --threads 2 --concurrency 2048   # one client core is not enough

Every trajectory ends completed, truncated (a length budget), aborted (deadline, over-sampling) or failed (with the
reason). Progress: a live line on a terminal; in a log file, one line per tenth of the run (none with --json or
--quiet). Exit code: 0 when none failed, 1 when some failed, 2 for bad flags or config, 130 on Ctrl-C.

--threads N helps only when agentrl itself is CPU-bound (a fast server, many short turns: agentrl near 100% of a core
while the servers wait); against slow generations one thread feeds thousands of trajectories. The file holds the same
trajectories with any N, in completion order; with --set output.order=sample it is rewritten in sample order when the
run ends, the same file for any N.`,
    )
    .action(async (flags: RolloutFlags) => {
      const { runRolloutCommand } = await import("../../rollout/command.js");
      await runRolloutCommand(flags);
    });
}
