/**
 * Where a run stands, for `train` and `sft` alike: its last finished step, the data cursor, the last checkpoint and
 * the weight version the engine serves. A checkpoint is the worker's (weights, optimizer, RNG) followed by state.json,
 * so state.json only ever names a complete checkpoint; --resume starts from it with no prompt skipped or repeated
 * (docs/run-folder.md).
 */
import path from "node:path";
import { WorkerError } from "../errors.js";
import type { WorkerClient } from "./worker/index.js";
import { DataCursor, type CursorState } from "./data-cursor.js";
import { cursorOf, type RunDir, type RunState } from "./run-dir.js";
import { resumeCommand } from "./resume-hint.js";

/** What the reporter of either command shows about checkpoints. */
export interface CheckpointReporter {
  phase(step: number, phase: "checkpoint"): void;
  note(message: string): void;
}

export interface RunOutcome {
  lastStep: number;
  /** Ctrl-C stopped the run: it checkpointed where it stood. */
  stopped: boolean;
  lastCheckpoint: string | undefined;
}

export class RunProgress {
  /** Last finished step (0 = none). */
  step: number;
  lastCheckpoint: string | undefined;
  /** The weight version the engine serves: the step whose weights were pushed last (train only). */
  weightVersion: string | null;
  readonly cursor: DataCursor;
  /**
   * The data position a checkpoint records. The cursor itself, unless generation runs ahead of training
   * (train/pending-draws.ts): then the first prompt not yet trained on.
   */
  cursorToSave: () => CursorState = () => this.cursor.position;

  /** `keepCheckpoints`: how many of the newest checkpoints stay in the run folder (verl's max_*ckpt_to_keep); null = all. */
  constructor(
    private readonly runDir: RunDir,
    dataSize: number,
    data: { seed: number; shuffle: boolean },
    resumed: RunState | undefined,
    private readonly keepCheckpoints: number | null = null,
  ) {
    this.cursor = new DataCursor(dataSize, data.seed, data.shuffle, cursorOf(resumed));
    this.step = resumed?.step ?? 0;
    this.lastCheckpoint = resumed ? path.join(runDir.root, resumed.checkpoint) : undefined;
    this.weightVersion = resumed?.weight_version ?? null;
  }

  /** Whether the run continues from a checkpoint (--resume found one). */
  get resumed(): boolean {
    return this.lastCheckpoint !== undefined;
  }

  /**
   * Loads the checkpoint the run continues from. The steps after it are redone and logged again, so their metric
   * lines go, unless `keepMetrics` (a validation-only run redoes none).
   */
  async resume(worker: WorkerClient, reporter: CheckpointReporter, options: { keepMetrics: boolean; unit: string }): Promise<void> {
    await worker.loadCheckpoint(this.lastCheckpoint!);
    if (!options.keepMetrics) this.runDir.truncateMetricsAfter(this.step);
    const { epoch, offset } = this.cursor.position;
    reporter.note(`resumed from ${this.runDir.relative(this.lastCheckpoint!)} (step ${this.step}, epoch ${epoch}, ${options.unit} ${offset})`);
  }

  /** A checkpoint every save_freq steps, at the last step, and after Ctrl-C. */
  due(saveFreq: number, last: boolean, aborted: boolean): boolean {
    return (saveFreq > 0 && this.step % saveFreq === 0) || last || aborted;
  }

  async save(worker: WorkerClient, reporter: CheckpointReporter): Promise<void> {
    reporter.phase(this.step, "checkpoint");
    const dir = this.runDir.checkpointDir(this.step);
    await worker.saveCheckpoint(dir);
    const checkpoint = this.runDir.relative(dir);
    await this.runDir.writeState({ step: this.step, cursor: this.cursorToSave(), checkpoint, weight_version: this.weightVersion });
    this.lastCheckpoint = dir;
    // Only once state.json names the new one: a crash in between leaves an extra old checkpoint, never too few.
    if (this.keepCheckpoints !== null) this.runDir.pruneCheckpoints(this.keepCheckpoints);
  }

  /** After Ctrl-C: a checkpoint of the last finished step, unless it has one already. */
  async saveOnStop(worker: WorkerClient, reporter: CheckpointReporter): Promise<void> {
    if (this.step > 0 && this.lastCheckpoint !== this.runDir.checkpointDir(this.step)) await this.save(worker, reporter);
  }

  outcome(stopped: boolean): RunOutcome {
    return { lastStep: this.step, stopped, lastCheckpoint: this.lastCheckpoint };
  }

  /** A worker failure says where to go on from: the last checkpoint, or nowhere yet. */
  withResumeHint(err: unknown, command: "train" | "sft"): unknown {
    if (!(err instanceof WorkerError)) return err;
    return err.withHint(
      this.lastCheckpoint
        ? `resume from ${this.runDir.relative(this.lastCheckpoint)} with: ${resumeCommand(command, this.runDir)}`
        : "no checkpoint yet: fix the cause and start again",
    );
  }
}
