/**
 * Parquet in and out, for nested rows. parquet-wasm does the file format, apache-arrow the in-memory columns.
 * Rows are plain JS objects; an explicit arrow Schema decides the parquet types (structs and lists stay real
 * nested types, never JSON strings), so pandas, pyarrow and HF `datasets` read the files the way verl does.
 */
import { openAsBlob, promises as fs } from "node:fs";
import {
  DataType,
  makeBuilder,
  makeData,
  RecordBatch,
  Struct,
  Schema,
  Table,
  tableFromIPC,
  tableToIPC,
  Vector,
  StructRow,
  type Field,
} from "apache-arrow";
import * as parquet from "parquet-wasm";
import { writeFileAtomic } from "./atomic.js";
import { fastColumn } from "./arrow-columns.js";
import { checkInputFile, describeFileError } from "./input-file.js";
import { InputError } from "../errors.js";

export type Compression = "zstd" | "snappy" | "gzip" | "none";

export interface WriteOptions {
  compression?: Compression;
  /** Rows per row group; readers stream one row group at a time. */
  rowGroupSize?: number;
  /** Key/value metadata stored on the file's arrow schema (e.g. HF `datasets`' `huggingface` features). */
  metadata?: Record<string, string>;
  /**
   * Dictionary-encode columns (parquet's default, kept when unset). Token-id lists have too many distinct values
   * for a dictionary to pay: on trajectories it made the encode ~4x slower and the file ~3x larger before zstd.
   */
  dictionary?: boolean;
  /**
   * Min/max statistics per column chunk (row group) only, not per page as well (parquet's default). Page statistics
   * were a third of a trajectory part's encode time (zstd 55 against 35 µs a trajectory), and readers prune row
   * groups by the chunk's statistics, which stay.
   */
  chunkStatisticsOnly?: boolean;
}

/** Builds an arrow Table with exactly `schema`'s types from plain row objects. */
export function rowsToTable(
  rows: readonly Record<string, unknown>[],
  schema: Schema,
  metadata: Record<string, string> = {},
): Table {
  // pyarrow and HF `datasets` read schema metadata from the arrow schema stored in the file, so it goes there.
  const withMetadata = new Schema(schema.fields, new Map([...schema.metadata, ...Object.entries(metadata)]));
  const children = schema.fields.map((field) => buildColumn(field, rows).data[0]!);
  // Assemble the batch from our schema directly: the Table({name: vector}) constructor would re-derive field
  // nullability and lose the schema's choices.
  const data = makeData({ type: new Struct(schema.fields), length: rows.length, nullCount: 0, children });
  return new Table(withMetadata, [new RecordBatch(withMetadata, data)]);
}

function buildColumn(field: Field, rows: readonly Record<string, unknown>[]): Vector {
  const values = rows.map((row) => row[field.name]);
  const fast = fastColumn(field, values);
  if (fast) return new Vector([fast]);
  const builder = makeBuilder({ type: field.type, nullValues: [null, undefined] });
  const coerce = coercerFor(field.type);
  for (const value of values) builder.append(coerce(value));
  return builder.finish().toVector();
}

type Coerce = (value: unknown) => unknown;
const identity: Coerce = (value) => value;

/**
 * Arrow's 64-bit integer builders take bigint; JS rows hold numbers. Returns a converter for one type that fixes
 * that at any depth, or the identity when the type holds no 64-bit integer.
 */
function coercerFor(type: DataType): Coerce {
  if (DataType.isInt(type) && type.bitWidth === 64) {
    return (value) => (typeof value === "number" ? BigInt(value) : value);
  }
  if (DataType.isStruct(type)) {
    const children = type.children.map((child) => [child.name, coercerFor(child.type)] as const);
    if (children.every(([, fn]) => fn === identity)) return identity;
    return (value) => {
      if (value === null || value === undefined || typeof value !== "object") return value;
      const out: Record<string, unknown> = { ...(value as Record<string, unknown>) };
      for (const [name, fn] of children) out[name] = fn(out[name]);
      return out;
    };
  }
  if (DataType.isList(type)) {
    const element = coercerFor(type.children[0]!.type);
    if (element === identity) return identity;
    return (value) => (Array.isArray(value) ? value.map(element) : value);
  }
  return identity;
}

function writerProperties(options: WriteOptions): parquet.WriterProperties {
  const codec = {
    zstd: parquet.Compression.ZSTD,
    snappy: parquet.Compression.SNAPPY,
    gzip: parquet.Compression.GZIP,
    none: parquet.Compression.UNCOMPRESSED,
  }[options.compression ?? "snappy"];
  let builder = new parquet.WriterPropertiesBuilder().setCompression(codec);
  if (options.rowGroupSize) builder = builder.setMaxRowGroupSize(options.rowGroupSize);
  if (options.dictionary === false) builder = builder.setDictionaryEnabled(false);
  if (options.chunkStatisticsOnly) builder = builder.setStatisticsEnabled(parquet.EnabledStatistics.Chunk);
  return builder.build();
}

/** Serialises a table to parquet bytes. */
export function tableToParquet(table: Table, options: WriteOptions = {}): Uint8Array {
  const wasmTable = parquet.Table.fromIPCStream(tableToIPC(table, "stream"));
  return parquet.writeParquet(wasmTable, writerProperties(options));
}

/** Writes rows to a parquet file atomically: a crash never leaves a half-written file at `file`. */
export async function writeParquetRows(
  file: string,
  rows: readonly Record<string, unknown>[],
  schema: Schema,
  options: WriteOptions = {},
): Promise<number> {
  const bytes = tableToParquet(rowsToTable(rows, schema, options.metadata), options);
  await writeFileAtomic(file, bytes);
  return bytes.byteLength;
}

/**
 * Writes record batches to a parquet file as they arrive, atomically: only the batch being encoded and the row group
 * being filled are in memory. With no batch at all it writes an empty file with `emptySchema`.
 */
export async function writeParquetStream(
  file: string,
  batches: AsyncIterable<parquet.RecordBatch>,
  emptySchema: Schema,
  options: WriteOptions = {},
): Promise<number> {
  const iterator = batches[Symbol.asyncIterator]();
  const first = await iterator.next();
  if (first.done) return writeParquetRows(file, [], emptySchema, options);
  let pending: parquet.RecordBatch | undefined = first.value;
  const stream = new ReadableStream<parquet.RecordBatch>({
    async pull(controller) {
      if (pending) {
        controller.enqueue(pending);
        pending = undefined;
        return;
      }
      const next = await iterator.next();
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
  });
  const bytes = (await parquet.transformParquetStream(stream, writerProperties(options))) as unknown as AsyncIterable<Uint8Array>;
  let written = 0;
  await writeFileAtomic(
    file,
    (async function* () {
      for await (const chunk of bytes) {
        written += chunk.byteLength;
        yield chunk;
      }
    })(),
  );
  return written;
}

/** The items of `items` in arrays of `size` (the last one shorter), for rowChunksToBatches. */
export async function* inChunks<T>(items: AsyncIterable<T>, size: number): AsyncGenerator<T[]> {
  let chunk: T[] = [];
  for await (const item of items) {
    chunk.push(item);
    if (chunk.length >= size) {
      yield chunk;
      chunk = [];
    }
  }
  if (chunk.length > 0) yield chunk;
}

/** Rows, a chunk at a time, as parquet-wasm record batches with exactly `schema`'s types (and `metadata`). */
export async function* rowChunksToBatches(
  chunks: AsyncIterable<readonly Record<string, unknown>[]>,
  schema: Schema,
  metadata: Record<string, string> = {},
): AsyncGenerator<parquet.RecordBatch> {
  for await (const rows of chunks) {
    if (rows.length === 0) continue;
    const wasmTable = parquet.Table.fromIPCStream(tableToIPC(rowsToTable(rows, schema, metadata), "stream"));
    for (const batch of wasmTable.recordBatches()) yield batch;
  }
}

/** Completes "<path>: is a folder, expected ..." for every parquet reader. */
const PARQUET_EXPECTED = "a .parquet file";

/** Reads a whole parquet file into an arrow Table. */
export async function readParquetTable(file: string): Promise<Table> {
  await checkInputFile(file, PARQUET_EXPECTED);
  const bytes = await fs.readFile(file).catch((err: unknown) => {
    throw describeFileError(file, err);
  });
  try {
    return tableFromIPC(parquet.readParquet(bytes).intoIPCStream());
  } catch (err) {
    throw new InputError(`${file}: not a readable parquet file (${(err as Error).message ?? err})`, { cause: err });
  }
}

export interface ParquetInfo {
  numRows: number;
  numRowGroups: number;
  schema: Schema;
}

/** Row count, row groups and schema, read from the footer only. */
export async function readParquetInfo(file: string): Promise<ParquetInfo> {
  const handle = await openParquetFile(file);
  const meta = handle.metadata().fileMetadata();
  const schema = tableFromIPC(
    (await handle.read({ limit: 0 })).intoIPCStream(),
  ).schema;
  return { numRows: meta.numRows(), numRowGroups: handle.metadata().numRowGroups(), schema };
}

/**
 * Opens a parquet file for streaming reads; a missing, unreadable or folder path is an InputError naming it. Every
 * parquet read goes through here or readParquetTable, so every command gets the same errors.
 */
export async function openParquetFile(file: string): Promise<parquet.ParquetFile> {
  // Before the Blob: parquet-wasm panics on a folder and loses ENOENT (input-file.ts).
  await checkInputFile(file, PARQUET_EXPECTED);
  try {
    return await parquet.ParquetFile.fromFile(await openAsBlob(file));
  } catch (err) {
    throw new InputError(`${file}: not a readable parquet file (${(err as Error).message ?? err})`, { cause: err });
  }
}

/**
 * Streams the rows of a parquet file as plain objects, a batch at a time, so memory stays bounded by the batch
 * size rather than the file size. `index` is the row's position in the file.
 */
export async function* streamParquetRows(
  file: string,
  options: { batchSize?: number; columns?: string[] } = {},
): AsyncGenerator<{ index: number; row: Record<string, unknown> }> {
  const handle = await openParquetFile(file);
  const readerOptions: parquet.ReaderOptions = { batchSize: options.batchSize ?? 1024 };
  if (options.columns) readerOptions.columns = options.columns;
  const stream = await handle.stream(readerOptions);
  let index = 0;
  for await (const batch of stream as AsyncIterable<parquet.RecordBatch>) {
    const table = tableFromIPC(batch.intoIPCStream());
    for (const row of tableRows(table)) yield { index: index++, row };
  }
}

/** Converts every row of a table to a plain object (bigint → number, nested vectors → arrays). */
export function* tableRows(table: Table): Generator<Record<string, unknown>> {
  for (let i = 0; i < table.numRows; i++) {
    yield toPlain(table.get(i)) as Record<string, unknown>;
  }
}

export function toPlain(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === "bigint") {
    return value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(value) : value;
  }
  if (value instanceof Vector) return Array.from(value, toPlain);
  if (value instanceof StructRow || (typeof value === "object" && value !== null && "toJSON" in value && !Array.isArray(value) && !(value instanceof Uint8Array))) {
    const json = (value as { toJSON(): Record<string, unknown> }).toJSON();
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(json)) out[key] = toPlain(child);
    return out;
  }
  if (ArrayBuffer.isView(value) && !(value instanceof DataView)) return Array.from(value as unknown as ArrayLike<number>, (x) => toPlain(x));
  if (Array.isArray(value)) return value.map(toPlain);
  return value;
}
