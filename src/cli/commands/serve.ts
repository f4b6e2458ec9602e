import type { Command } from "commander";
import { notYetAvailable } from "./not-yet.js";

export function registerServe(program: Command): void {
  program
    .command("serve")
    .description("Start an inference engine (embedded CPU engine or SGLang) as a managed child")
    .action(() => notYetAvailable("serve", 6));
}
