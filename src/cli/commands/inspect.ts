import type { Command } from "commander";
import { notYetAvailable } from "./not-yet.js";

export function registerInspect(program: Command): void {
  program
    .command("inspect")
    .description("Read trajectory files and run folders in the terminal")
    .action(() => notYetAvailable("inspect", 8));
}
