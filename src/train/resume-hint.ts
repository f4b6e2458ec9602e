/**
 * The command printed after Ctrl-C (or a crash) of `agentrl train` and `agentrl sft`. It names the run folder's own
 * config.yaml, which every run writes with its effective config (file, --set, --steps, --name all applied), so it
 * resumes the very run that stopped, whatever flags started it. Rebuilding the user's flags instead would drop some
 * (a --set, --steps or --name left out pointed --resume at another run folder, or at none).
 */
import type { RunDir } from "./run-dir.js";

/** Quotes a word for a POSIX shell, only when it needs it, so the usual paths print as they are. */
export function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** `agentrl <command> --config <run folder>/config.yaml --resume`, runnable as printed from the same folder. */
export function resumeCommand(command: "train" | "sft", runDir: RunDir): string {
  return `agentrl ${command} --config ${shellQuote(runDir.configFile)} --resume`;
}

/**
 * The user's own command line, for the one case the run folder's config cannot resume: validating a run's checkpoint
 * (trainer.val_only with --resume) keeps the training config.yaml, which would go on training. --api-key and its
 * value are left out: a secret is never printed (SGLANG_API_KEY in the environment is the way to pass it).
 */
export function repeatCommand(argv: readonly string[]): string {
  const words: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i]!;
    if (word === "--api-key") {
      i += 1;
      continue;
    }
    if (word.startsWith("--api-key=")) continue;
    words.push(shellQuote(word));
  }
  return ["agentrl", ...words].join(" ");
}
