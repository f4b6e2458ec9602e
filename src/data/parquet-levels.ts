/**
 * Repetition and definition levels kept the way a data page stores them, as runs of parquet's RLE/bit-packing hybrid
 * (a varint header, the run's length times two, then the level in one byte): each level extends the current run or
 * starts one, so a token list of 500 ids adds one run, not 500 bytes to scan again when the page is written.
 */
import { GrowingBytes } from "./growing-bytes.js";

/** Levels above this would need more than one byte a run; no schema agentrl writes comes near it. */
export const MAX_LEVEL = 255;

export class LevelRuns {
  /** The finished runs. */
  private readonly runs = new GrowingBytes(16);
  /** The run being extended: its level (-1: none yet) and length. */
  private level = -1;
  private run = 0;
  /** The state after the last whole row (mark), to take a half-striped row back. */
  private readonly marked = [0, -1, 0];

  /** Appends `times` copies of `level`. */
  push(level: number, times = 1): void {
    if (times <= 0) return;
    if (level === this.level) {
      this.run += times;
      return;
    }
    this.closeRun();
    this.level = level;
    this.run = times;
  }

  private closeRun(): void {
    if (this.run === 0) return;
    this.runs.varint(this.run * 2);
    this.runs.push(this.level);
  }

  mark(): void {
    this.marked[0] = this.runs.length;
    this.marked[1] = this.level;
    this.marked[2] = this.run;
  }

  restore(): void {
    this.runs.length = this.marked[0]!;
    this.level = this.marked[1]!;
    this.run = this.marked[2]!;
  }

  /** The levels as a v1 data page holds them: their byte length (4 bytes, little-endian), then the runs. */
  encoded(): Uint8Array {
    const tail = new GrowingBytes(8);
    if (this.run > 0) {
      tail.varint(this.run * 2);
      tail.push(this.level);
    }
    const length = this.runs.length + tail.length;
    const out = Buffer.allocUnsafe(4 + length);
    out.writeUInt32LE(length, 0);
    this.runs.bytes.copy(out, 4, 0, this.runs.length);
    tail.bytes.copy(out, 4 + this.runs.length, 0, tail.length);
    return out;
  }
}

/** `levels` as a data page holds them (LevelRuns.encoded), from a plain list. */
export function encodeLevels(levels: ArrayLike<number>): Uint8Array {
  const runs = new LevelRuns();
  for (let i = 0; i < levels.length; i++) runs.push(levels[i]!);
  return runs.encoded();
}
