/**
 * Trajectory files on disk, written as rollouts finish and safe against a crash at any moment.
 *
 * - `.jsonl`: one line per trajectory, appended with a write(2) each, so a killed run keeps every finished line.
 * - `.parquet`: while running, finished trajectories go to `<file>.parts/pending.jsonl` (appended as above, their
 *   number lists packed: trajectory-journal.ts) and,
 *   every `rowGroupSize` of them, into a complete parquet part (`part-000001.parquet`, written atomically). When a
 *   part takes its rows, the journal holding them is renamed `pending-000001.jsonl` (the part's number) and a new
 *   `pending.jsonl` starts; once the part is on disk, its journal is removed. `close()` copies the parts' row groups
 *   into `<file>` as they are (parquet-concat.ts) and removes the folder. A killed run leaves the folder; `--resume`
 *   picks it up, and every reader here reads it too.
 * Readers de-duplicate on `id`, so the one crash window (a part written, its journal not yet removed) never yields a
 * trajectory twice.
 *
 * `resume` removes the failed trajectories it finds (each file rewritten atomically, trajectory-compaction.ts) and
 * leaves their ids out of `existingIds`, so the caller runs them again; `keepFailed` keeps them like the rest.
 */
import {
  closeSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  openSync,
  promises as fs,
  readSync,
  renameSync,
  writeFileSync,
  writeSync,
  writevSync,
} from "node:fs";
import path from "node:path";
import { InputError, RefusedError } from "../errors.js";
import { pathExists, temporarySibling, writeFileAtomic } from "./atomic.js";
import { rewriteJsonlWithout, rewritePartWithout, type DropRecord } from "./trajectory-compaction.js";
import { readJsonLines } from "./jsonl.js";
import { journalEntry, journalLine, unpackJournalRecord } from "./trajectory-journal.js";
import { inChunks, rowChunksToBatches, streamParquetRows, writeParquetStream } from "./parquet.js";
import { ColumnarParquet } from "./parquet-columnar.js";
import { concatParquetFiles } from "./parquet-concat.js";
import { parseTrajectory, sampleOrder, TRAJECTORY_PARQUET, trajectoryArrowSchema, type Trajectory } from "./trajectory.js";
import { trajectoryFromParquetRow, trajectoryParquetRow } from "./trajectory-encoding.js";

export { parseTrajectory };

export type TrajectoryFormat = "parquet" | "jsonl";

export function trajectoryFormatOf(file: string): TrajectoryFormat {
  if (file.endsWith(".parquet") || file.endsWith(".parquet.parts")) return "parquet";
  if (file.endsWith(".jsonl") || file.endsWith(".json")) return "jsonl";
  throw new InputError(`${file}: unknown trajectory file type`, { hint: "use a .parquet or .jsonl file name" });
}

export interface OpenOptions {
  /**
   * Keep what an earlier run wrote and report its ids, so the caller skips them. Failed trajectories (a server
   * error after every retry, a reward function that threw) are removed instead, so the caller redoes them, unless
   * `keepFailed`.
   */
  resume?: boolean;
  /** With `resume`: keep failed trajectories on disk and in `existingIds`, so they are not redone. */
  keepFailed?: boolean;
  /** Replace an existing output. */
  force?: boolean;
  /** Trajectories per parquet part (row group). */
  rowGroupSize?: number;
  /**
   * `close()` rewrites the file in sample order (data_index, then sample_index) instead of the order trajectories
   * finished in, so any concurrency or thread count gives the same file. It reads the whole file into memory.
   */
  sampleOrder?: boolean;
}

export interface TrajectoryWriter {
  readonly file: string;
  /** Ids already on disk when the writer was opened with `resume` (failed ones only with `keepFailed`). */
  readonly existingIds: ReadonlySet<string>;
  /** Failed trajectories `resume` removed from disk: not in `existingIds`, so the caller runs them again. */
  readonly removedFailed: number;
  /** Failed trajectories `resume` kept (`keepFailed`): in `existingIds`. */
  readonly keptFailed: number;
  /** Trajectories written by this writer. */
  readonly written: number;
  /**
   * Resolves once the trajectory's line is in the journal (or the `.jsonl` file): safe from a kill. A parquet part
   * is written behind it; a write waits for that only when parts fall a whole part behind.
   */
  write(trajectory: Trajectory): Promise<void>;
  /** Resolves once every parquet part queued so far is on disk (`.jsonl`: at once); rejects if one failed. */
  settled(): Promise<void>;
  /** Finishes the file. Safe to call once; after a crash, reopening with `resume` finishes it instead. */
  close(): Promise<void>;
}

export async function openTrajectoryWriter(file: string, options: OpenOptions = {}): Promise<TrajectoryWriter> {
  await fs.mkdir(path.dirname(path.resolve(file)), { recursive: true });
  return trajectoryFormatOf(file) === "jsonl" ? openJsonl(file, options) : openParquet(file, options);
}

function refuseExisting(what: string): never {
  throw new RefusedError(`output already exists: ${what}`, {
    hint: "pass --resume to continue it, --force to replace it, or choose another --out",
  });
}

/**
 * The refusal openTrajectoryWriter gives for an existing output without --resume or --force, checked without
 * creating anything: a command calls it before it starts servers, so a run that would be refused fails at once.
 * An empty .jsonl is not refused: it holds nothing to lose.
 */
export async function checkTrajectoryOutput(file: string, options: OpenOptions = {}): Promise<void> {
  if (options.resume || options.force) return;
  if (trajectoryFormatOf(file) === "jsonl") {
    if ((await pathExists(file)) && (await fs.stat(file)).size > 0) refuseExisting(file);
    return;
  }
  const partsDir = partsDirOf(file);
  if (await pathExists(partsDir)) refuseExisting(partsDir);
  if (await pathExists(file)) refuseExisting(file);
}

const NEWLINE = Buffer.from("\n");
/** Lines per writev(2): two buffers each (the line, its newline), 512 in all, within every platform's IOV_MAX. */
const LINES_PER_WRITE = 256;

/**
 * Writes `lines`, each followed by a newline, in one writev(2) per 256 lines: each line is encoded straight into a
 * buffer of its own, outside the JS heap, where joining them first built the whole batch again as one string on it.
 */
function writeLines(fd: number, lines: readonly string[]): void {
  for (let from = 0; from < lines.length; from += LINES_PER_WRITE) {
    const buffers: Buffer[] = [];
    for (const line of lines.slice(from, from + LINES_PER_WRITE)) buffers.push(Buffer.from(line), NEWLINE);
    const total = buffers.reduce((sum, buffer) => sum + buffer.length, 0);
    const written = writevSync(fd, buffers);
    // A regular file takes the whole write short of a full disk; a short one goes on where it stopped.
    let rest = written < total ? Buffer.concat(buffers).subarray(written) : undefined;
    while (rest !== undefined && rest.length > 0) rest = rest.subarray(writeSync(fd, rest));
  }
}

/**
 * Appends lines with write(2); on open, drops a torn last line left by a kill mid-write.
 *
 * Lines appended in one turn of the event loop go out in one write(2), after the loop's I/O callbacks: at 64
 * trajectories in flight several finish per turn, and a write per line was a fifth of the writer's CPU. The promise
 * `append` returns settles once its line is written, so a caller that awaits it still has it on disk (in the page
 * cache, safe from a kill) before it goes on.
 */
class LineAppender {
  private fd: number;
  private batch: string[] = [];
  private batchWritten: Promise<void> | undefined;
  constructor(readonly file: string) {
    this.fd = openSync(file, "a+");
    dropTornLastLine(this.fd);
  }
  append(line: string): Promise<void> {
    this.batch.push(line);
    this.batchWritten ??= new Promise<void>((resolve, reject) => {
      setImmediate(() => {
        try {
          this.flush();
          resolve();
        } catch (err) {
          reject(err);
        }
      });
    });
    return this.batchWritten;
  }
  /** Writes the lines appended so far now. */
  flush(): void {
    const lines = this.batch;
    this.batch = [];
    this.batchWritten = undefined;
    if (lines.length > 0) writeLines(this.fd, lines);
  }
  /**
   * Moves the file, with every line appended so far, to `to`, and goes on appending to a new, empty file of its own
   * name: the lines a parquet part takes stay in a journal of their own until the part is on disk, and nothing is
   * written twice (rewriting the journal with the lines still pending after each part cost a write of them, a join
   * of them and an fsync).
   */
  rotate(to: string): void {
    this.flush();
    // Renamed while open (the descriptor follows the file), so a failed rename leaves this appender as it was.
    renameSync(this.file, to);
    closeSync(this.fd);
    this.fd = openSync(this.file, "a+");
  }
  /** Atomically replaces the file's content with `lines` (temporary file, fsync, rename) and appends there next. */
  replaceWith(lines: readonly string[]): void {
    // Lines not yet written belong to the old content; the caller's `lines` hold whatever of them is still needed.
    this.flush();
    const temp = temporarySibling(this.file);
    writeFileSync(temp, lines.map((line) => `${line}\n`).join(""));
    const tempFd = openSync(temp, "r+");
    fsyncSync(tempFd);
    closeSync(tempFd);
    renameSync(temp, this.file);
    closeSync(this.fd);
    this.fd = openSync(this.file, "a+");
  }
  close(): void {
    this.flush();
    closeSync(this.fd);
  }
}

function dropTornLastLine(fd: number): void {
  const size = fstatSync(fd).size;
  if (size === 0) return;
  const tail = Buffer.alloc(Math.min(size, 1 << 20));
  readSync(fd, tail, 0, tail.length, size - tail.length);
  if (tail[tail.length - 1] === 0x0a) return;
  const lastNewline = tail.lastIndexOf(0x0a);
  ftruncateSync(fd, lastNewline < 0 ? size - tail.length : size - tail.length + lastNewline + 1);
}

const isFailed: DropRecord = (record) => record.status === "failed";

/**
 * What a resume finds on disk, record by record in reading order: the ids the caller skips, and the failed
 * trajectories that leave the disk to be redone (unless `keepFailed`). An id also recorded as something other than
 * failed keeps that record and is not redone (no writer produces that, but a redo must never duplicate an id).
 */
class ResumeScan {
  readonly ids = new Set<string>();
  private readonly failedIds = new Set<string>();
  constructor(private readonly keepFailed: boolean) {}

  /** Notes `t`; false when it is a failed trajectory to remove from disk. */
  keeps(t: Trajectory): boolean {
    if (t.status === "failed") this.failedIds.add(t.id);
    if (t.status === "failed" && !this.keepFailed) return false;
    this.ids.add(t.id);
    return true;
  }

  get removedFailed(): number {
    if (this.keepFailed) return 0;
    let count = 0;
    for (const id of this.failedIds) if (!this.ids.has(id)) count += 1;
    return count;
  }

  get keptFailed(): number {
    return this.keepFailed ? this.failedIds.size : 0;
  }
}

async function openJsonl(file: string, options: OpenOptions): Promise<TrajectoryWriter> {
  const scan = new ResumeScan(Boolean(options.keepFailed));
  await checkTrajectoryOutput(file, options);
  if (await pathExists(file)) {
    if (options.force && !options.resume) await fs.rm(file);
    else if (options.resume) {
      await removeStaleTemps(path.dirname(file), (name) => name === path.basename(file));
      const appender = new LineAppender(file); // drops a torn last line before we read
      appender.close();
      let drops = false;
      for await (const t of readJsonlTrajectories(file)) if (!scan.keeps(t)) drops = true;
      // Atomic, and done before the first append: a kill leaves the old file (the next resume drops them again)
      // or the new one, never a redone trajectory behind its failed copy.
      if (drops) await rewriteJsonlWithout(file, isFailed);
    }
  }
  const appender = new LineAppender(file);
  let written = 0;
  return {
    file,
    existingIds: scan.ids,
    removedFailed: scan.removedFailed,
    keptFailed: scan.keptFailed,
    get written() {
      return written;
    },
    async write(trajectory) {
      written += 1;
      await appender.append(JSON.stringify(trajectory));
    },
    async settled() {},
    async close() {
      appender.close();
      if (options.sampleOrder) await rewriteInSampleOrder(file);
    },
  };
}

function partsDirOf(file: string): string {
  return `${file}.parts`;
}

async function openParquet(file: string, options: OpenOptions): Promise<TrajectoryWriter> {
  const partsDir = partsDirOf(file);
  const rowGroupSize = options.rowGroupSize ?? 256;
  await prepareParts(file, partsDir, options);
  const scan = new ResumeScan(Boolean(options.keepFailed));
  const partsWithDrops = await scanParts(partsDir, scan);
  const pendingFile = path.join(partsDir, PENDING_JOURNAL);
  const journals = await listJournals(partsDir);
  const { pending, drops: pendingDrops } = await scanPending(journals, scan);
  // Each part and the journal are rewritten on their own, atomically, before anything is appended
  // (trajectory-compaction.ts says why this survives a kill at any point).
  for (const part of partsWithDrops) await rewritePartWithout(path.join(partsDir, part), isFailed, rowGroupSize);
  const appender = new LineAppender(pendingFile);
  // A part's journal left by a kill joins pending.jsonl, which then holds every pending trajectory, before it goes:
  // a kill in between leaves duplicates, which readers drop.
  const rotated = journals.filter((journal) => journal !== pendingFile);
  if (pendingDrops || rotated.length > 0) appender.replaceWith(pending.map(journalLine));
  for (const journal of rotated) await fs.rm(journal, { force: true });
  const parts = await listParts(partsDir);
  const nextPart = parts.length === 0 ? 1 : partNumber(parts.at(-1)!) + 1;
  const columns = await trajectoryColumns(rowGroupSize);
  for (const t of pending) columns.append(trajectoryParquetRow(t));
  return partsWriter({ file, partsDir, rowGroupSize, scan, columns, appender, nextPart, sampleOrder: Boolean(options.sampleOrder) });
}

/** The striped columns trajectory parts are written from: zstd, row groups of `rowGroupSize` (TRAJECTORY_PARQUET's). */
function trajectoryColumns(rowGroupSize: number): Promise<ColumnarParquet> {
  return ColumnarParquet.open(trajectoryArrowSchema, { compression: "zstd", rowGroupSize });
}

/** The journal trajectories are appended to; part N is `part-N.parquet`, and its own journal `pending-N.jsonl`. */
const PENDING_JOURNAL = "pending.jsonl";
const partNumberText = (part: number): string => String(part).padStart(6, "0");
const partFileName = (part: number): string => `part-${partNumberText(part)}.parquet`;
const partJournalName = (part: number): string => `pending-${partNumberText(part)}.jsonl`;

/** The parts folder's journals in the order they were written: the parts' own (by number), then pending.jsonl. */
async function listJournals(partsDir: string): Promise<string[]> {
  const names = await fs.readdir(partsDir).catch(() => [] as string[]);
  const ofParts = names.filter((n) => /^pending-\d+\.jsonl$/.test(n)).sort();
  return [...ofParts, ...(names.includes(PENDING_JOURNAL) ? [PENDING_JOURNAL] : [])].map((n) => path.join(partsDir, n));
}

/**
 * Readies `<file>.parts`: cleared for a new run; with `resume`, cleared of what a killed run left half-done, and
 * holding a finished file as its first part.
 */
async function prepareParts(file: string, partsDir: string, options: OpenOptions): Promise<void> {
  const fileExists = await pathExists(file);
  const partsExist = await pathExists(partsDir);
  await checkTrajectoryOutput(file, options);
  if (!options.resume && (fileExists || partsExist)) {
    await fs.rm(file, { force: true });
    await fs.rm(partsDir, { recursive: true, force: true });
  }
  if (options.resume) {
    // close() renames the merged file into place only once every part is in it, and removes the parts after: both
    // present means a run died in between, and the parts are stale copies of what the file holds.
    if (fileExists && partsExist) await fs.rm(partsDir, { recursive: true, force: true });
    await removeStaleTemps(path.dirname(file), (name) => name === path.basename(file));
    // The folder is this writer's alone: any temporary in it is a part or journal rewrite a kill cut short.
    await removeStaleTemps(partsDir, () => true);
  }
  await fs.mkdir(partsDir, { recursive: true });
  // A finished file being resumed becomes the first part, so new trajectories join it on close.
  if (options.resume && fileExists) await fs.rename(file, path.join(partsDir, partFileName(0)));
}

/** Notes every trajectory of the parts in `scan`; returns the parts holding failed ones to remove. */
async function scanParts(partsDir: string, scan: ResumeScan): Promise<string[]> {
  const partsWithDrops: string[] = [];
  for (const part of await listParts(partsDir)) {
    let drops = false;
    for await (const t of readPart(path.join(partsDir, part))) if (!scan.keeps(t)) drops = true;
    if (drops) partsWithDrops.push(part);
  }
  return partsWithDrops;
}

/** The journals' trajectories that are in no part yet (kept ones), and whether they hold failed ones to remove. */
async function scanPending(journals: readonly string[], scan: ResumeScan): Promise<{ pending: Trajectory[]; drops: boolean }> {
  const pending: Trajectory[] = [];
  let drops = false;
  for (const journal of journals) {
    new LineAppender(journal).close(); // drops a torn last line before we read
    for await (const t of readJsonlTrajectories(journal, { journal: true })) {
      if (scan.ids.has(t.id)) continue;
      if (scan.keeps(t)) pending.push(t);
      else drops = true;
    }
  }
  return { pending, drops };
}

/** The writer over a ready parts folder: journals each trajectory, and every `rowGroupSize` of them writes a part. */
function partsWriter(state: {
  file: string;
  partsDir: string;
  rowGroupSize: number;
  scan: ResumeScan;
  /** The trajectories in the journal and in no part yet, striped into parquet columns as they came. */
  columns: ColumnarParquet;
  appender: LineAppender;
  nextPart: number;
  sampleOrder: boolean;
}): TrajectoryWriter {
  const { file, partsDir, rowGroupSize, scan, columns, appender, sampleOrder } = state;
  let nextPart = state.nextPart;
  let written = 0;
  let chain: Promise<void> = Promise.resolve();
  /** A part write is queued and has not taken its rows yet: the trajectories arriving meanwhile go into it. */
  let partQueued = false;
  /** The first part write that failed: every later write and close() rejects with it. */
  let partFailure: { error: unknown } | undefined;

  const flushPart = async (): Promise<void> => {
    if (columns.rows === 0) return;
    nextPart += 1;
    await writePart(partsDir, nextPart - 1, columns, appender);
  };

  return {
    file,
    existingIds: scan.ids,
    removedFailed: scan.removedFailed,
    keptFailed: scan.keptFailed,
    get written() {
      return written;
    },
    write(trajectory) {
      if (partFailure) return Promise.reject(partFailure.error);
      const { line, lists } = journalEntry(trajectory);
      try {
        // Striped before it is journaled: a record the file cannot hold is refused whole, and never resumed.
        columns.append(trajectoryParquetRow({ ...trajectory, ...lists }));
      } catch (err) {
        return Promise.reject(err);
      }
      const journaled = appender.append(line);
      written += 1;
      // One queued part at a time. Queuing one per arrival while a part was being written made a part of one or
      // two trajectories for each arrival at high concurrency (1,039 row groups for 4,096 trajectories at 512).
      if (columns.rows >= rowGroupSize && !partQueued) {
        partQueued = true;
        chain = chain.then(() => {
          partQueued = false;
          return flushPart();
        });
        chain.catch((error: unknown) => {
          partFailure ??= { error };
        });
      }
      // The journal line is what keeps a trajectory safe from a crash, so that is what a write waits for. Waiting for
      // the part being written as well held every trajectory finishing during its fsync, and the slot that ran it,
      // until the part was on disk; it waits only when parts fall a whole part behind (backpressure).
      if (columns.rows < 2 * rowGroupSize) return journaled;
      return Promise.all([journaled, chain]).then(() => undefined);
    },
    settled() {
      return chain;
    },
    async close() {
      await chain;
      await flushPart();
      appender.close();
      await mergeParts(partsDir, file, rowGroupSize);
      await fs.rm(partsDir, { recursive: true, force: true });
      if (sampleOrder) await rewriteInSampleOrder(file, rowGroupSize);
    },
  };
}

/**
 * Part `number`: the rows `columns` holds, in row groups of its rowGroupSize (close() copies the parts' row groups
 * into the file as they are). Trajectories finishing while the part is written stay pending for the next part: their
 * lines go to a new pending.jsonl, while the journal of the rows taken (in the same synchronous step) waits beside
 * the part until it is on disk.
 */
async function writePart(partsDir: string, number: number, columns: ColumnarParquet, appender: LineAppender): Promise<void> {
  const part = columns.take();
  const journal = path.join(partsDir, partJournalName(number));
  appender.rotate(journal);
  await writeFileAtomic(path.join(partsDir, partFileName(number)), part);
  // A crash before this leaves the rows both in the part and in its journal; readers de-duplicate them.
  await fs.rm(journal, { force: true });
}

/** A run killed while writing a file atomically leaves its temporary (atomic.ts's `.<name>.tmp-<pid>-<hex>`) in
 * the folder; nothing else writes such names, so a resumed run clears those for `isOurs` targets before it writes. */
async function removeStaleTemps(dir: string, isOurs: (target: string) => boolean): Promise<void> {
  for (const name of await fs.readdir(dir).catch(() => [] as string[])) {
    const target = /^\.(.+)\.tmp-\d+-[0-9a-f]+$/.exec(name)?.[1];
    if (target !== undefined && isOurs(target)) await fs.rm(path.join(dir, name), { force: true });
  }
}

async function listParts(partsDir: string): Promise<string[]> {
  const names = await fs.readdir(partsDir).catch(() => [] as string[]);
  return names.filter((n) => /^part-\d+\.parquet$/.test(n)).sort();
}

function partNumber(name: string): number {
  return Number(/part-(\d+)/.exec(name)?.[1] ?? 0);
}

/** Trajectories as a parquet file of `rowGroupSize` rows a group, written atomically. */
async function writeTrajectoryParquet(file: string, trajectories: readonly Trajectory[], rowGroupSize: number): Promise<void> {
  const columns = await trajectoryColumns(rowGroupSize);
  for (const t of trajectories) columns.append(trajectoryParquetRow(t));
  await writeFileAtomic(file, columns.take());
}

/**
 * Joins the parts into one parquet file (written beside it, then renamed): their row groups copied as they are
 * (parquet-concat.ts), each at most `rowGroupSize` rows so readers stream it with bounded memory. Parts that do
 * not share one schema (none at all, or a resumed file from another version, such as format 1's JSON-text
 * columns) are read and written again, a row group at a time, in this version's schema.
 */
async function mergeParts(partsDir: string, file: string, rowGroupSize: number): Promise<void> {
  const parts = await listParts(partsDir);
  if (await concatParquetFiles(parts.map((part) => path.join(partsDir, part)), file)) return;
  async function* rows(): AsyncGenerator<Record<string, unknown>> {
    for (const part of parts) for await (const t of readPart(path.join(partsDir, part))) yield trajectoryParquetRow(t);
  }
  const batches = rowChunksToBatches(inChunks(rows(), rowGroupSize), trajectoryArrowSchema);
  await writeParquetStream(file, batches, trajectoryArrowSchema, TRAJECTORY_PARQUET(rowGroupSize));
}

/**
 * The finished file again, in sample order (OpenOptions.sampleOrder), written atomically: whole in memory, as the
 * rows of every part interleave. Parquet in row groups of `rowGroupSize`.
 */
async function rewriteInSampleOrder(file: string, rowGroupSize = 256): Promise<void> {
  const all: Trajectory[] = [];
  for await (const t of readTrajectories(file)) all.push(t);
  all.sort(sampleOrder);
  if (trajectoryFormatOf(file) === "jsonl") await writeFileAtomic(file, all.map((t) => `${JSON.stringify(t)}\n`).join(""));
  else await writeTrajectoryParquet(file, all, rowGroupSize);
}

/** A `.jsonl` output, or with `journal` one of a parts folder's journals (its number lists packed). */
async function* readJsonlTrajectories(file: string, options: { journal?: boolean } = {}): AsyncGenerator<Trajectory> {
  for await (const { line, value, error } of readJsonLines(file)) {
    if (error) throw new InputError(`${file}:${line}: ${error}`);
    const place = `${file}:${line}`;
    yield parseTrajectory(options.journal ? unpackJournalRecord(value, place) : value, place);
  }
}

async function* readPart(file: string): AsyncGenerator<Trajectory> {
  for await (const { index, row } of streamParquetRows(file)) yield parseTrajectory(trajectoryFromParquetRow(row), `${file}: row ${index}`);
}

async function* readParts(partsDir: string): AsyncGenerator<Trajectory> {
  const seen = new Set<string>();
  async function* unseen(from: AsyncIterable<Trajectory>): AsyncGenerator<Trajectory> {
    for await (const t of from) {
      if (seen.has(t.id)) continue;
      seen.add(t.id);
      yield t;
    }
  }
  // The folder may be a running writer's. Its rows move pending.jsonl → pending-N.jsonl (renamed when part N takes
  // them) → part-N.parquet (written before that journal is removed). So: the parts, the journals, the journals that
  // appeared meanwhile (a rename between listing pending.jsonl and opening it), then the parts that appeared
  // meanwhile (a journal gone before it was opened). Every row is in one of them; duplicates are dropped.
  const parts = await listParts(partsDir);
  for (const part of parts) yield* unseen(readPart(path.join(partsDir, part)));
  const journals = await listJournals(partsDir);
  for (const journal of journals) yield* unseen(readJournalIfThere(journal));
  for (const journal of await listJournals(partsDir)) if (!journals.includes(journal)) yield* unseen(readJournalIfThere(journal));
  for (const part of await listParts(partsDir)) if (!parts.includes(part)) yield* unseen(readPart(path.join(partsDir, part)));
}

/** A journal's trajectories; none when the running writer removed it before it was opened (its part is on disk). */
async function* readJournalIfThere(journal: string): AsyncGenerator<Trajectory> {
  try {
    yield* readJsonlTrajectories(journal, { journal: true });
  } catch (err) {
    // Once open, a file removed meanwhile still reads whole: only a missing file ends up here.
    if (!(await pathExists(journal))) return;
    throw err;
  }
}

/**
 * Reads trajectories from a .jsonl file, a .parquet file, or an unfinished parquet output (its `.parts` folder),
 * streaming: memory stays bounded by one parquet batch.
 */
export async function* readTrajectories(file: string): AsyncGenerator<Trajectory> {
  const format = trajectoryFormatOf(file);
  if (format === "jsonl") {
    if (!(await pathExists(file))) throw new InputError(`${file}: no such file`);
    yield* readJsonlTrajectories(file);
    return;
  }
  const partsDir = file.endsWith(".parts") ? file : partsDirOf(file);
  const finalFile = file.endsWith(".parts") ? file.slice(0, -".parts".length) : file;
  // The final file beside a parts folder holds every part (a run died while removing the folder): read the file.
  if ((await pathExists(partsDir)) && !(await pathExists(finalFile))) {
    yield* readParts(partsDir);
    return;
  }
  if (!(await pathExists(finalFile))) throw new InputError(`${file}: no such file`);
  yield* readPart(finalFile);
}
