import { Command } from "commander";
import { collect, positiveInt } from "../flag-values.js";
import type { SftFlags } from "../../sft/command.js";

export function registerSft(program: Command): void {
  program
    .command("sft")
    .description("Supervised fine-tuning on multi-turn, tool-using conversations (a warm start before RL)")
    .option("-c, --config <file>", "SFT config YAML with verl's SFT keys (data.*, model.partial_pretrain, optim.*, trainer.*)")
    .option("--set <key=value>", "override any config key, e.g. --set optim.lr=1e-4 (repeatable)", collect)
    .option("--steps <n>", "stop after N optimizer steps (trainer.total_training_steps)", positiveInt("--steps"))
    .option("--name <name>", "run name (trainer.experiment_name): the run folder is runs/<name>")
    .option("--resume", "continue the run from its last checkpoint: weights, optimizer, data order, step")
    .option("--force", "start over in a run folder that already holds a run")
    .option("--dry-run", "read and tokenize the data, print the effective config and what it implies, then exit")
    .option("--json", "one JSON object per step on stdout instead of the console lines")
    .option("-q, --quiet", "no live status line; one line per step")
    .addHelpText(
      "after",
      `
Examples:
  $ agentrl sft --config examples/cpu-demo-sft.yaml              # the CPU demo's warm start (then: agentrl train)
  $ agentrl sft --config sft.yaml --set data.train_files=runs/x/rollouts/step-000050.parquet --set data.min_reward=1
  $ agentrl sft --config sft.yaml --dry-run                       # rows kept, truncated and dropped; steps; tokens

Data: parquet or JSON-lines rows with a messages column (OpenAI chat messages: assistant tool_calls, tool
messages) and an optional tools column (data.multiturn.messages_key / tools_key), or trajectory files written by
'agentrl rollout' / 'agentrl train' (kept when completed and reward >= data.min_reward). Tokens and the loss mask
come from the same conversation code as RL: the loss is on assistant tokens only, exactly the mask
'agentrl template --messages FILE --model DIR' shows.

The run folder runs/<name>/ holds config.yaml, metrics.jsonl (sft/loss, val/loss per step), checkpoints/ and, at
the end, model/: a Hugging Face folder that actor_rollout_ref.model.path in a train config can name. Ctrl-C saves a
checkpoint; --resume continues with no conversation skipped or repeated.`,
    )
    .action(async (flags: SftFlags) => {
      const { runSftCommand } = await import("../../sft/command.js");
      await runSftCommand(flags);
    });
}
