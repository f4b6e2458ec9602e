import type { Command } from "commander";
import { notYetAvailable } from "./not-yet.js";

export function registerTemplate(program: Command): void {
  program
    .command("template")
    .description("Render a conversation with a model's chat template: text, token ids and loss mask")
    .action(() => notYetAvailable("template", 3));
}
