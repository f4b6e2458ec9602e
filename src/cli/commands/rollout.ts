import type { Command } from "commander";
import { notYetAvailable } from "./not-yet.js";

export function registerRollout(program: Command): void {
  program
    .command("rollout")
    .description("Run asynchronous multi-turn rollouts against SGLang servers and write token-level trajectories")
    .action(() => notYetAvailable("rollout", 4));
}
