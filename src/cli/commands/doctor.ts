import type { Command } from "commander";
import { notYetAvailable } from "./not-yet.js";

export function registerDoctor(program: Command): void {
  program
    .command("doctor")
    .description("Pre-flight checks of a model, its chat template and an inference server")
    .action(() => notYetAvailable("doctor", 6));
}
