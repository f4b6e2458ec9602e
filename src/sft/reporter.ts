/** What `agentrl sft` shows (train/console.ts): the phase of each step, one line per step, the validation loss, notes. */
import { formatDuration } from "../term.js";
import { consoleReporter, type ConsoleFlags } from "../train/console.js";

export type SftPhase = "train" | "validate" | "checkpoint" | "save";

export interface SftReporter {
  phase(step: number, phase: SftPhase): void;
  stepDone(step: number, metrics: Record<string, number>): void;
  validationDone(step: number, metrics: Record<string, number>): void;
  note(message: string): void;
}

const f4 = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? "-" : x.toFixed(4));

export function sftReporter(total: number, flags: ConsoleFlags): SftReporter & { stop(): void } {
  return consoleReporter<SftPhase>(total, flags, {
    step: stepLine,
    validation: (metrics) => `val/loss ${f4(metrics["val/loss"])} over ${metrics["val/tokens"]} tokens`,
  });
}

function stepLine(step: number, total: number, m: Record<string, number>): string {
  return (
    `step ${String(step).padStart(4)}/${total} | loss ${f4(m["sft/loss"])} | grad_norm ${f4(m["sft/grad_norm"])} | ` +
    `lr ${(m["sft/lr"] ?? 0).toExponential(2)} | tokens ${Math.round(m["sft/tokens"] ?? 0)} | epoch ${m["sft/epoch"] ?? 0} | ` +
    formatDuration((m["timing_s/step"] ?? 0) * 1000)
  );
}
