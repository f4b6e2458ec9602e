/**
 * The table of contents of the CLI. Each command lives in src/cli/commands/<name>.ts, declares its flags there and
 * imports its heavy modules lazily inside its action, so `agentrl --help` stays fast.
 */
import { Command, CommanderError } from "commander";
import { describeError, ExitError } from "../errors.js";
import { packageVersion } from "../repo-paths.js";
import { registerPreprocess } from "./commands/preprocess.js";
import { registerRollout } from "./commands/rollout.js";
import { registerTrain } from "./commands/train.js";
import { registerSft } from "./commands/sft.js";
import { registerExport } from "./commands/export.js";
import { registerInspect } from "./commands/inspect.js";
import { registerServe } from "./commands/serve.js";
import { registerDoctor } from "./commands/doctor.js";
import { registerParse } from "./commands/parse.js";
import { registerTemplate } from "./commands/template.js";

export function buildProgram(): Command {
  const program = new Command("agentrl")
    .description(
      "Agentic RL for language models: multi-turn tool-calling rollouts against SGLang, " +
        "GRPO training with a PyTorch/FSDP worker, and trajectories in the terminal.",
    )
    .version(packageVersion(), "-V, --version", "print the agentrl version")
    .showSuggestionAfterError(true)
    .addHelpText(
      "after",
      `
Typical flow:
  $ agentrl preprocess gsm8k --input ../shared/datasets/gsm8k --out data/gsm8k
  $ agentrl rollout --data data/gsm8k/test.parquet --model MODEL_DIR --server http://127.0.0.1:30000
  $ agentrl sft --config examples/cpu-demo-sft.yaml
  $ agentrl train --config examples/cpu-demo.yaml
  $ agentrl inspect runs/cpu-demo

Run 'agentrl <command> --help' for the flags of each command.`,
    );
  registerPreprocess(program);
  registerRollout(program);
  registerSft(program);
  registerTrain(program);
  registerExport(program);
  registerInspect(program);
  registerServe(program);
  registerDoctor(program);
  registerParse(program);
  registerTemplate(program);
  return program;
}

/** Applies exitOverride and error capture to a command and all its subcommands. */
function captureErrors(command: Command, sink: { message: string }): void {
  command.exitOverride();
  command.configureOutput({
    writeErr: (text) => {
      sink.message += text;
    },
  });
  for (const sub of command.commands) captureErrors(sub, sink);
}

export { setQuitNow } from "../interrupt.js";

/** Runs the CLI and resolves to the process exit code. Never calls process.exit itself. */
export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  const sink = { message: "" };
  captureErrors(program, sink);
  try {
    await program.parseAsync(argv);
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === "commander.helpDisplayed" || err.code === "commander.version" || err.exitCode === 0) {
        return 0;
      }
      if (err.code === "commander.help") return 0;
      // Commander writes "error: ..." and, where it has one, a "(Did you mean ...?)" line: fold them into one line.
      const text = (sink.message || err.message).replace(/\s*\n\s*/g, " ").trim();
      const line = text.startsWith("error:") ? text : `error: ${text}`;
      process.stderr.write(`${line}\nhint: run 'agentrl --help' or 'agentrl <command> --help' for usage\n`);
      return 2;
    }
    if (!(err instanceof ExitError && err.message === "")) process.stderr.write(`${describeError(err)}\n`);
    if (process.env.AGENTRL_DEBUG && err instanceof Error && err.stack) process.stderr.write(`${err.stack}\n`);
    const code = (err as { exitCode?: unknown }).exitCode;
    return typeof code === "number" ? code : 1;
  }
}
