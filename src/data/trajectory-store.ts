/**
 * Trajectory files on disk, written as rollouts finish and safe against a crash at any moment.
 *
 * - `.jsonl`: one line per trajectory, appended with a write(2) each, so a killed run keeps every finished line.
 * - `.parquet`: while running, finished trajectories go to `<file>.parts/pending.jsonl` (appended as above) and,
 *   every `rowGroupSize` of them, into a complete parquet part (`part-000001.parquet`, written atomically). `close()`
 *   streams the parts into `<file>` (one row group per part) and removes the folder. A killed run leaves the folder;
 *   `--resume` picks it up, and every reader here reads it too.
 * Readers de-duplicate on `id`, so the one crash window (a part written, its pending lines not yet cleared) never
 * yields a trajectory twice.
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
} from "node:fs";
import path from "node:path";
import * as parquet from "parquet-wasm";
import { InputError, RefusedError } from "../errors.js";
import { pathExists, temporarySibling } from "./atomic.js";
import { readJsonLines } from "./jsonl.js";
import { openParquetFile, streamParquetRows, writeParquetRows, writeParquetStream } from "./parquet.js";
import { trajectoryArrowSchema, trajectorySchema, type Trajectory } from "./trajectory.js";
import { formatIssues } from "./verl-rows.js";

export type TrajectoryFormat = "parquet" | "jsonl";

export function trajectoryFormatOf(file: string): TrajectoryFormat {
  if (file.endsWith(".parquet") || file.endsWith(".parquet.parts")) return "parquet";
  if (file.endsWith(".jsonl") || file.endsWith(".json")) return "jsonl";
  throw new InputError(`${file}: unknown trajectory file type`, { hint: "use a .parquet or .jsonl file name" });
}

export interface OpenOptions {
  /** Keep what an earlier run wrote and report its ids, so the caller skips them. */
  resume?: boolean;
  /** Replace an existing output. */
  force?: boolean;
  /** Trajectories per parquet part (row group). */
  rowGroupSize?: number;
}

export interface TrajectoryWriter {
  readonly file: string;
  /** Ids already on disk when the writer was opened with `resume`. */
  readonly existingIds: ReadonlySet<string>;
  /** Trajectories written by this writer. */
  readonly written: number;
  write(trajectory: Trajectory): Promise<void>;
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

export function parseTrajectory(value: unknown, place: string): Trajectory {
  const parsed = trajectorySchema.safeParse(value);
  if (!parsed.success) throw new InputError(`${place}: not a trajectory record: ${formatIssues(parsed.error)}`);
  return parsed.data;
}

/** Appends lines with write(2); on open, drops a torn last line left by a kill mid-write. */
class LineAppender {
  private fd: number;
  constructor(readonly file: string) {
    this.fd = openSync(file, "a+");
    dropTornLastLine(this.fd);
  }
  append(line: string): void {
    writeSync(this.fd, `${line}\n`);
  }
  /** Atomically replaces the file's content with `lines` (temporary file, fsync, rename) and appends there next. */
  replaceWith(lines: readonly string[]): void {
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

async function openJsonl(file: string, options: OpenOptions): Promise<TrajectoryWriter> {
  const existingIds = new Set<string>();
  await checkTrajectoryOutput(file, options);
  if (await pathExists(file)) {
    if (options.force && !options.resume) await fs.rm(file);
    else if (options.resume) {
      const appender = new LineAppender(file); // drops a torn last line before we read
      appender.close();
      for await (const t of readJsonlTrajectories(file)) existingIds.add(t.id);
    }
  }
  const appender = new LineAppender(file);
  let written = 0;
  return {
    file,
    existingIds,
    get written() {
      return written;
    },
    async write(trajectory) {
      appender.append(JSON.stringify(trajectory));
      written += 1;
    },
    async close() {
      appender.close();
    },
  };
}

function partsDirOf(file: string): string {
  return `${file}.parts`;
}

async function openParquet(file: string, options: OpenOptions): Promise<TrajectoryWriter> {
  const partsDir = partsDirOf(file);
  const rowGroupSize = options.rowGroupSize ?? 256;
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
    await removeStaleMergeTemps(file);
  }
  await fs.mkdir(partsDir, { recursive: true });
  // A finished file being resumed becomes the first part, so new trajectories join it on close.
  if (options.resume && fileExists) await fs.rename(file, path.join(partsDir, "part-000000.parquet"));

  const existingIds = new Set<string>();
  const pending: Trajectory[] = [];
  for await (const t of readParts(partsDir, { includePending: false })) existingIds.add(t.id);
  const pendingFile = path.join(partsDir, "pending.jsonl");
  if (await pathExists(pendingFile)) {
    new LineAppender(pendingFile).close();
    for await (const t of readJsonlTrajectories(pendingFile)) {
      if (existingIds.has(t.id)) continue;
      existingIds.add(t.id);
      pending.push(t);
    }
  }
  const appender = new LineAppender(pendingFile);
  let nextPart = (await listParts(partsDir)).length === 0 ? 1 : partNumber((await listParts(partsDir)).at(-1)!) + 1;
  let written = 0;
  let chain: Promise<void> = Promise.resolve();

  const flushPart = async (): Promise<void> => {
    if (pending.length === 0) return;
    const name = path.join(partsDir, `part-${String(nextPart).padStart(6, "0")}.parquet`);
    nextPart += 1;
    // Trajectories finishing while the part is written stay pending for the next part.
    const rows = pending.splice(0, pending.length);
    await writeParquetRows(name, rows, trajectoryArrowSchema, { compression: "zstd" });
    // Synchronously, so no write() interleaves: the journal now holds exactly what is still pending. A crash before
    // this leaves `rows` both in the part and in the journal; readers de-duplicate them.
    appender.replaceWith(pending.map((t) => JSON.stringify(t)));
  };

  return {
    file,
    existingIds,
    get written() {
      return written;
    },
    write(trajectory) {
      appender.append(JSON.stringify(trajectory));
      pending.push(trajectory);
      written += 1;
      if (pending.length >= rowGroupSize) chain = chain.then(flushPart);
      return chain;
    },
    async close() {
      await chain;
      await flushPart();
      appender.close();
      await mergeParts(partsDir, file, rowGroupSize);
      await fs.rm(partsDir, { recursive: true, force: true });
    },
  };
}

/** A run killed while merging leaves its temporary file (atomic.ts's `.<name>.tmp-<pid>-<hex>`) beside the output;
 * nothing else writes such names, so a resumed run clears them before it merges again. */
async function removeStaleMergeTemps(file: string): Promise<void> {
  const dir = path.dirname(file);
  const prefix = `.${path.basename(file)}.tmp-`;
  for (const name of await fs.readdir(dir)) if (name.startsWith(prefix)) await fs.rm(path.join(dir, name), { force: true });
}

async function listParts(partsDir: string): Promise<string[]> {
  const names = await fs.readdir(partsDir).catch(() => [] as string[]);
  return names.filter((n) => /^part-\d+\.parquet$/.test(n)).sort();
}

function partNumber(name: string): number {
  return Number(/part-(\d+)/.exec(name)?.[1] ?? 0);
}

/** Streams every part's record batches into one parquet file (written beside it, then renamed), in row groups of
 * `rowGroupSize` rows so readers can stream it with bounded memory. */
async function mergeParts(partsDir: string, file: string, rowGroupSize: number): Promise<void> {
  const parts = await listParts(partsDir);
  async function* batches(): AsyncGenerator<parquet.RecordBatch> {
    for (const part of parts) {
      const handle = await openParquetFile(path.join(partsDir, part));
      yield* (await handle.stream()) as unknown as AsyncIterable<parquet.RecordBatch>;
    }
  }
  await writeParquetStream(file, batches(), trajectoryArrowSchema, { compression: "zstd", rowGroupSize });
}

async function* readJsonlTrajectories(file: string): AsyncGenerator<Trajectory> {
  for await (const { line, value, error } of readJsonLines(file)) {
    if (error) throw new InputError(`${file}:${line}: ${error}`);
    yield parseTrajectory(value, `${file}:${line}`);
  }
}

async function* readParts(partsDir: string, options: { includePending: boolean }): AsyncGenerator<Trajectory> {
  const seen = new Set<string>();
  for (const part of await listParts(partsDir)) {
    const file = path.join(partsDir, part);
    for await (const { index, row } of streamParquetRows(file)) {
      const t = parseTrajectory(row, `${file}: row ${index}`);
      if (seen.has(t.id)) continue;
      seen.add(t.id);
      yield t;
    }
  }
  const pendingFile = path.join(partsDir, "pending.jsonl");
  if (options.includePending && (await pathExists(pendingFile))) {
    for await (const t of readJsonlTrajectories(pendingFile)) {
      if (seen.has(t.id)) continue;
      seen.add(t.id);
      yield t;
    }
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
    yield* readParts(partsDir, { includePending: true });
    return;
  }
  if (!(await pathExists(finalFile))) throw new InputError(`${file}: no such file`);
  for await (const { index, row } of streamParquetRows(finalFile)) yield parseTrajectory(row, `${finalFile}: row ${index}`);
}
