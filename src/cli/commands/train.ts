import type { Command } from "commander";
import { notYetAvailable } from "./not-yet.js";

export function registerTrain(program: Command): void {
  program
    .command("train")
    .description("Train a model with GRPO: rollouts, advantages, a persistent PyTorch worker, weight sync")
    .action(() => notYetAvailable("train", 7));
}
