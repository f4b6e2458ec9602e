import { Command } from "commander";
import { collect, positiveInt } from "../flag-values.js";
import type { TrainFlags } from "../../train/command.js";

export function registerTrain(program: Command): void {
  program
    .command("train")
    .description("Train a model with GRPO: rollouts, advantages, a persistent PyTorch worker, weight sync, checkpoints")
    .option("-c, --config <file>", "run config YAML with verl's keys (data.*, actor_rollout_ref.*, algorithm.*, trainer.*)")
    .option("--set <key=value>", "override any config key, e.g. --set actor_rollout_ref.actor.optim.lr=1e-5 (repeatable)", collect)
    .option("--engine <name>", "embedded: start agentrl's engine (CPU or GPU); sglang: attach to --server URLs")
    .option("-s, --server <url>", "attach to a running SGLang server or router (repeat for several); implies --engine sglang", collect)
    .option("--colocate", "SGLang shares the GPUs with training: its memory is released around each update")
    .option("--steps <n>", "stop after N training steps (trainer.total_training_steps)", positiveInt("--steps"))
    .option("--name <name>", "run name (trainer.experiment_name): the run folder is runs/<name>")
    .option("--resume", "continue the run from its last checkpoint: weights, optimizer, data order, step")
    .option("--force", "start over in a run folder that already holds a run")
    .option("--dry-run", "print the effective config and what it implies (batch sizes, token budgets, GPUs), then exit")
    .option("--json", "one JSON object per step on stdout instead of the console table")
    .option("-q, --quiet", "no live status line; one line per step")
    .option("--api-key <key>", "API key of the SGLang servers (prefer the SGLANG_API_KEY environment variable)")
    .addHelpText(
      "after",
      `
Examples:
  $ agentrl train --config examples/cpu-demo.yaml                 # the CPU demo: tiny model, embedded engine
  $ agentrl train --config examples/gsm8k-qwen2.5-3b.yaml --server http://127.0.0.1:30000 --colocate
  $ agentrl train --config examples/cpu-demo.yaml --resume        # after Ctrl-C or a crash
  $ agentrl train --config run.yaml --set trainer.total_training_steps=5 --dry-run

Everything about the run lands in runs/<name>/: config.yaml, metrics.jsonl (one line per step), rollouts/ (each
step's trajectories, readable with 'agentrl inspect'), checkpoints/, logs/. Ctrl-C saves a checkpoint and exits;
--resume continues with no prompt skipped or repeated.`,
    )
    .action(async (flags: TrainFlags) => {
      const { runTrainCommand } = await import("../../train/command.js");
      await runTrainCommand(flags);
    });
}
