/**
 * The run folder (docs/run-folder.md): where a training run keeps its config, metrics, rollouts, checkpoints and
 * logs, and the small state file that --resume starts from. Every file that matters for resume is written atomically.
 */
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { mkdir, readFile } from "node:fs/promises";
import path from "node:path";
import { dump as dumpYaml } from "js-yaml";
import { z } from "zod";
import { InputError, RefusedError, UsageError } from "../errors.js";
import { writeFileAtomic } from "../data/atomic.js";
import { checkOutputPath } from "../data/output-path.js";
import type { CursorState } from "./data-cursor.js";

export const runStateSchema = z.object({
  /** Last completed training step (0 = none). */
  step: z.number().int().nonnegative(),
  cursor: z.object({ epoch: z.number().int(), offset: z.number().int(), skip: z.array(z.number().int().nonnegative()).optional() }),
  /** Checkpoint folder of `step`, relative to the run folder. */
  checkpoint: z.string(),
  weight_version: z.string().nullable(),
});
export type RunState = z.infer<typeof runStateSchema>;

export class RunDir {
  constructor(readonly root: string) {}

  get configFile(): string {
    return path.join(this.root, "config.yaml");
  }
  get stateFile(): string {
    return path.join(this.root, "state.json");
  }
  get metricsFile(): string {
    return path.join(this.root, "metrics.jsonl");
  }
  /** Per-step batch and log-prob files while a step runs; emptied when a run starts, removed when it ends. */
  get scratchDir(): string {
    return path.join(this.root, ".scratch");
  }
  /**
   * Empties the scratch folder at the start of a loop. It is in the run folder, not $TMPDIR: a run killed mid-step
   * leaves its batch files where its next start clears them.
   */
  clearScratch(): void {
    this.removeScratch();
    mkdirSync(this.scratchDir, { recursive: true });
  }
  removeScratch(): void {
    rmSync(this.scratchDir, { recursive: true, force: true });
  }
  get weightsDir(): string {
    return path.join(this.root, "weights");
  }
  logFile(name: string): string {
    return path.join(this.root, "logs", `${name}.log`);
  }
  rolloutFile(step: number, kind: "step" | "val" = "step"): string {
    return path.join(this.root, "rollouts", `${kind}-${String(step).padStart(6, "0")}.parquet`);
  }
  checkpointDir(step: number): string {
    return path.join(this.root, "checkpoints", `step-${String(step).padStart(6, "0")}`);
  }

  /** Removes all but the `keep` newest checkpoints (by step); the newest is the one state.json names. */
  pruneCheckpoints(keep: number): void {
    const folder = path.join(this.root, "checkpoints");
    const steps = readdirSync(folder)
      .map((name) => /^step-(\d+)$/.exec(name))
      .filter((match): match is RegExpExecArray => match !== null)
      .map((match) => Number(match[1]))
      .sort((a, b) => b - a);
    for (const step of steps.slice(Math.max(keep, 1))) rmSync(this.checkpointDir(step), { recursive: true, force: true });
  }

  /**
   * Creates the folder. A folder with a previous run needs --resume (continue) or --force (start over); --resume
   * where no run ever started is refused before anything is created, so a mistyped run name leaves no empty folder.
   */
  async prepare(options: { resume: boolean; force: boolean }): Promise<RunState | undefined> {
    if (options.resume && !existsSync(this.stateFile) && !existsSync(this.configFile)) {
      throw new UsageError(`${this.root}: no run to resume`, { hint: "start without --resume" });
    }
    const hasRun = existsSync(this.stateFile) || existsSync(this.metricsFile);
    if (hasRun && !options.resume && !options.force) {
      throw new RefusedError(`${this.root} already holds a run`, {
        hint: "pass --resume to continue it from its last checkpoint, --force to start over, or set trainer.experiment_name",
      });
    }
    await checkOutputPath(this.root, "folder");
    if (hasRun && options.force && !options.resume) {
      const { rm } = await import("node:fs/promises");
      await rm(this.root, { recursive: true, force: true });
    }
    for (const sub of ["rollouts", "checkpoints", "logs"]) await mkdir(path.join(this.root, sub), { recursive: true });
    if (options.resume) return this.readState();
    return undefined;
  }

  async readState(): Promise<RunState | undefined> {
    if (!existsSync(this.stateFile)) return undefined;
    const parsed = runStateSchema.safeParse(JSON.parse(await readFile(this.stateFile, "utf8")));
    if (!parsed.success) throw new InputError(`${this.stateFile}: not a run state file`);
    return parsed.data;
  }

  async writeState(state: RunState): Promise<void> {
    await writeFileAtomic(this.stateFile, `${JSON.stringify(state, null, 2)}\n`);
  }

  async writeConfig(config: unknown): Promise<void> {
    await writeFileAtomic(this.configFile, dumpYaml(config, { lineWidth: 120 }));
  }

  appendMetrics(record: Record<string, unknown>): void {
    appendFileSync(this.metricsFile, `${JSON.stringify(record)}\n`);
  }

  /** On resume, steps after the checkpoint are redone: their metric lines go, so each step appears once. */
  truncateMetricsAfter(step: number): void {
    if (!existsSync(this.metricsFile)) return;
    const kept = readFileSync(this.metricsFile, "utf8")
      .split("\n")
      .filter((line) => {
        if (!line.trim()) return false;
        try {
          return (JSON.parse(line) as { step?: number }).step! <= step;
        } catch {
          return false;
        }
      });
    writeFileSync(this.metricsFile, kept.map((l) => `${l}\n`).join(""));
  }

  relative(p: string): string {
    return path.relative(this.root, p);
  }
}

/** The run folder a config names: trainer.default_local_dir, else runs/<trainer.experiment_name>. */
export function runDirOf(config: { trainer: { default_local_dir: string | null; experiment_name: string } }): RunDir {
  return new RunDir(config.trainer.default_local_dir ?? path.join("runs", config.trainer.experiment_name));
}

export function cursorOf(state: RunState | undefined): CursorState | undefined {
  return state ? { ...state.cursor } : undefined;
}
