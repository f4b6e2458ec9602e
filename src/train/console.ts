/**
 * The console of `train` and `sft`: a live status line on stderr (a TTY only, not with --quiet or --json), one line
 * per step, validation and note on stdout, or one JSON object per event with --json. Each command supplies its own
 * step and validation lines; the loops never print by themselves.
 */
import ora from "ora";
import { dump as dumpYaml } from "js-yaml";
import { style } from "../term.js";

export interface ConsoleFlags {
  json?: boolean;
  quiet?: boolean;
}

export interface ConsoleReporter<Phase extends string> {
  phase(step: number, phase: Phase): void;
  /** Shown after the current phase on the status line, until the next phase (rollout progress). */
  progress(text: string): void;
  stepDone(step: number, metrics: Record<string, number>): void;
  validationDone(step: number, metrics: Record<string, number>): void;
  note(message: string): void;
  stop(): void;
}

export interface ConsoleLines {
  step(step: number, total: number, metrics: Record<string, number>): string;
  /** What follows "validation @ step N: ". */
  validation(metrics: Record<string, number>): string;
}

export function consoleReporter<Phase extends string>(total: number, flags: ConsoleFlags, lines: ConsoleLines): ConsoleReporter<Phase> {
  const live = !flags.quiet && !flags.json && process.stderr.isTTY;
  const spinner = ora({ stream: process.stderr, isSilent: !live });
  let phaseText = "";
  const out = (line: string) => {
    if (spinner.isSpinning) spinner.clear();
    process.stdout.write(`${line}\n`);
    if (spinner.isSpinning) spinner.render();
  };
  /** One JSON object with --json, else the line. */
  const emit = (record: Record<string, unknown>, line: () => string) => {
    if (flags.json) process.stdout.write(`${JSON.stringify(record)}\n`);
    else out(line());
  };
  return {
    phase(step, phase) {
      if (!spinner.isSpinning && live) spinner.start();
      phaseText = `step ${step}/${total} · ${phase}`;
      spinner.text = phaseText;
    },
    progress(text) {
      spinner.text = `${phaseText}${text}`;
    },
    stepDone(step, metrics) {
      emit({ event: "step", step, ...metrics }, () => lines.step(step, total, metrics));
    },
    validationDone(step, metrics) {
      emit({ event: "validation", step, ...metrics }, () => `${style.cyan("validation")} @ step ${step}: ${lines.validation(metrics)}`);
    },
    note(message) {
      emit({ event: "note", message }, () => style.dim(message));
    },
    stop() {
      spinner.stop();
    },
  };
}

/**
 * --dry-run: the effective config and what it implies, as YAML and a list, or one JSON object with --json. A value
 * that cannot be known without reading more (null) prints as `unknown`.
 */
export function printDryRun(config: unknown, implied: Record<string, unknown>, json: boolean, unknown = "unknown"): void {
  if (json) {
    process.stdout.write(`${JSON.stringify({ config, implied }, null, 2)}\n`);
    return;
  }
  process.stdout.write(`# effective config\n${dumpYaml(config, { lineWidth: 120 })}\n# what it implies\n`);
  for (const [key, value] of Object.entries(implied)) process.stdout.write(`- ${key.replaceAll("_", " ")}: ${value ?? unknown}\n`);
}
