/**
 * Removing records from trajectory files that a killed run may have left half-done: `rollout --resume` drops the
 * failed trajectories of an earlier run this way before it runs them again.
 *
 * Crash safety: every file is rewritten on its own, atomically (temporary sibling, fsync, rename), and no record
 * ever moves from one file to another. A kill at any moment therefore leaves each file either whole and old or whole
 * and new: readers see every kept trajectory exactly once in either state, some dropped records may still be there,
 * and the next resume finds them and drops them again. The alternative, moving a part's kept rows into the pending
 * journal and deleting the part, would hold a whole finished file (which a resume turns into part 0) in memory and
 * would leave duplicates in the window between the two steps; rewriting the part streams it with bounded memory.
 *
 * The caller must finish every rewrite before it appends a new version of a dropped record: readers keep the first
 * record of an id, so a stale copy left in an earlier file would hide the new one.
 */
import { createReadStream, promises as fs } from "node:fs";
import { createInterface } from "node:readline";
import { writeFileAtomic } from "./atomic.js";
import { inChunks, rowChunksToBatches, streamParquetRows, writeParquetStream } from "./parquet.js";
import { parseTrajectory, TRAJECTORY_PARQUET, trajectoryArrowSchema } from "./trajectory.js";
import { trajectoryFromParquetRow, trajectoryParquetRow } from "./trajectory-encoding.js";

/** Decides from a record's raw fields (JSON value or parquet row) whether it goes. */
export type DropRecord = (record: Record<string, unknown>) => boolean;

/** Rewrites a JSON-lines file without the records `drop` picks; the kept lines stay byte for byte, in order. */
export async function rewriteJsonlWithout(file: string, drop: DropRecord): Promise<void> {
  async function* kept(): AsyncGenerator<Buffer> {
    const lines = createInterface({ input: createReadStream(file, { encoding: "utf8" }), crlfDelay: Infinity });
    for await (const line of lines) {
      if (line.trim() === "" || drop(JSON.parse(line) as Record<string, unknown>)) continue;
      yield Buffer.from(`${line}\n`);
    }
  }
  await writeFileAtomic(file, kept());
}

/**
 * Rewrites one parquet part without the rows `drop` picks, streaming (row groups of `rowGroupSize`), in this
 * version's schema (a part of an older format is validated and encoded again). A part left with no row is removed
 * instead: unlinking is atomic too, and an empty part would only be noise.
 */
export async function rewritePartWithout(file: string, drop: DropRecord, rowGroupSize: number): Promise<void> {
  let keptRows = 0;
  async function* kept(): AsyncGenerator<Record<string, unknown>> {
    for await (const { index, row } of streamParquetRows(file)) {
      if (drop(row)) continue;
      keptRows += 1;
      yield trajectoryParquetRow(parseTrajectory(trajectoryFromParquetRow(row), `${file}: row ${index}`));
    }
  }
  // The rename inside comes after the last row is read, so the part is never read and replaced at once.
  const batches = rowChunksToBatches(inChunks(kept(), rowGroupSize), trajectoryArrowSchema);
  await writeParquetStream(file, batches, trajectoryArrowSchema, TRAJECTORY_PARQUET(rowGroupSize));
  if (keptRows === 0) await fs.rm(file, { force: true });
}
