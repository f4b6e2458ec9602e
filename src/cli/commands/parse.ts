import type { Command } from "commander";
import { notYetAvailable } from "./not-yet.js";

export function registerParse(program: Command): void {
  program
    .command("parse")
    .description("Parse model output text (stdin) into tool calls with a function-call parser")
    .action(() => notYetAvailable("parse", 3));
}
