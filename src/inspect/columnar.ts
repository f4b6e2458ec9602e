/**
 * Reads a finished trajectory parquet column by column, only the columns a view needs, in large batches, without
 * turning each row into a JS object tree first: token lists become typed-array views into the batch. This is what
 * makes the summary of 100k trajectories take seconds (bench/inspect-summary.mjs); the row-by-row reader
 * (readTrajectories + zod) stays the path for JSONL, unfinished `.parts` folders, --grep and `show`.
 *
 * Validation: instead of zod on every row, the file's arrow schema must give every requested column exactly the
 * type of trajectoryArrowSchema (src/data/trajectory.ts); arrow then guarantees every row's shape. Otherwise it is
 * an InputError naming the file and the column.
 */
import { makeVector, tableFromIPC, type Data, type Field, type Schema, type Vector } from "apache-arrow";
import * as parquet from "parquet-wasm";
import { InputError } from "../errors.js";
import { openParquetFile, tableRows } from "../data/parquet.js";
import { FORMAT_1_COLUMN_TYPES, parseTrajectory, trajectoryArrowSchema, type Trajectory } from "../data/trajectory.js";
import { fromJsonText, trajectoryFromParquetRow } from "../data/trajectory-encoding.js";
import type { TrajectoryRecord } from "./record.js";

/** Rows per decoded batch: large batches amortise the wasm → arrow hand-over (~32 MB for 300-token trajectories). */
const BATCH_ROWS = 8192;

const LIST_COLUMNS = new Set(["prompt_ids", "response_ids", "response_mask", "response_logprobs", "trainer_logprobs"]);

/** Columns newer than some files: a file without one gives records without the field. */
const OPTIONAL_COLUMNS = new Set(["version_spans", "context_segments"]);

function checkColumns(file: string, schema: Schema, columns: readonly string[]): void {
  const expected = new Map<string, Field>(trajectoryArrowSchema.fields.map((f) => [f.name, f]));
  const found = new Map<string, Field>(schema.fields.map((f) => [f.name, f]));
  for (const name of columns) {
    if (OPTIONAL_COLUMNS.has(name) && !found.has(name)) continue;
    const want = expected.get(name);
    if (!want) throw new Error(`inspect asked for '${name}', which is not a trajectory column`);
    const have = found.get(name);
    const hint = "give a trajectory file written by agentrl rollout or train, or a run folder";
    if (!have) throw new InputError(`${file}: not a trajectory file (no column '${name}')`, { hint });
    const format1 = FORMAT_1_COLUMN_TYPES.get(name);
    if (String(have.type) !== String(want.type) && !(format1 && String(have.type) === String(format1))) {
      throw new InputError(`${file}: not a trajectory file (column '${name}' is ${have.type}, expected ${want.type})`, { hint });
    }
  }
}

type Read = (row: number) => unknown;

const plain = (value: unknown) => (typeof value === "bigint" ? Number(value) : (value ?? null));

function scalarReader(vector: Vector): Read {
  return (row) => plain(vector.get(row));
}

/** A column of JSON text (reward_extra): the value it holds. */
function jsonTextReader(vector: Vector): Read {
  return (row) => fromJsonText(plain(vector.get(row)));
}

/** list<number>: a typed-array view of the row's values, or null for a null list. */
function listReader(data: Data): Read {
  const offsets = data.valueOffsets as Int32Array;
  const child = data.children[0]!;
  const values = child.values as Int8Array | Int32Array | Float32Array;
  const base = child.offset;
  const start = data.offset;
  return (row) => {
    if (data.nullCount > 0 && !data.getValid(row)) return null;
    return values.subarray(base + offsets[start + row]!, base + offsets[start + row + 1]!);
  };
}

/** list<struct>: the calls' name, latency and error kind. */
function callsReader(data: Data): Read {
  const offsets = data.valueOffsets as Int32Array;
  const struct = data.children[0]!;
  const fieldData = (name: string) => {
    const index = struct.type.children.findIndex((f: Field) => f.name === name);
    return makeVector(struct.children[index]!);
  };
  const names = fieldData("name");
  const latencies = fieldData("latency_ms");
  const kinds = fieldData("error_kind");
  const start = data.offset;
  return (row) => {
    const calls: TrajectoryRecord["calls"] = [];
    for (let j = offsets[start + row]!; j < offsets[start + row + 1]!; j++) {
      calls.push({ name: names.get(j) as string, latency_ms: latencies.get(j) as number, error_kind: (kinds.get(j) as string | null) ?? null });
    }
    return calls;
  };
}

/** list<struct> whose rows become plain objects of every field (version_spans). */
function structListReader(data: Data): Read {
  const offsets = data.valueOffsets as Int32Array;
  const struct = data.children[0]!;
  const fields = struct.type.children.map((f: Field, i: number) => [f.name, makeVector(struct.children[i]!)] as const);
  const start = data.offset;
  return (row) => {
    if (!data.getValid(row)) return null;
    const items: Record<string, unknown>[] = [];
    for (let j = offsets[start + row]!; j < offsets[start + row + 1]!; j++) {
      items.push(Object.fromEntries(fields.map(([name, vector]: readonly [string, Vector]) => [name, plain(vector.get(j))])));
    }
    return items;
  };
}

/** Streams projected records carrying exactly `columns` (an optional column the file lacks is left out). */
export async function* streamTrajectoryColumns(file: string, columns: readonly string[]): AsyncGenerator<TrajectoryRecord> {
  const handle = await openParquetFile(file);
  let wanted = [...new Set(columns)];
  let schema: Schema;
  try {
    schema = tableFromIPC((await handle.read({ limit: 0 })).intoIPCStream()).schema;
  } catch (err) {
    throw new InputError(`${file}: not a readable parquet file (${(err as Error).message ?? err})`, { cause: err });
  }
  checkColumns(file, schema, wanted);
  const present = new Set(schema.fields.map((f) => f.name));
  wanted = wanted.filter((name) => present.has(name));
  const stream = (await handle.stream({ batchSize: BATCH_ROWS, columns: wanted })) as unknown as AsyncIterable<parquet.RecordBatch>;
  for await (const wasmBatch of stream) {
    const table = tableFromIPC(wasmBatch.intoIPCStream());
    for (const batch of table.batches) {
      const readers: Array<[string, Read]> = wanted.map((name) => {
        const vector = batch.getChild(name)!;
        const data = vector.data[0]!;
        if (name === "calls") return [name, callsReader(data)];
        if (name === "version_spans") return [name, structListReader(data)];
        if (name === "reward_extra") return [name, jsonTextReader(vector)];
        if (LIST_COLUMNS.has(name)) return [name, listReader(data)];
        return [name, scalarReader(vector)];
      });
      for (let row = 0; row < batch.numRows; row++) {
        const record: Record<string, unknown> = {};
        for (const [name, read] of readers) record[name] = read(row);
        yield record as TrajectoryRecord;
      }
    }
  }
}

/**
 * Reads whole trajectories at the given rows of the file (0-based), validated with zod like readTrajectories. With
 * streamTrajectoryColumns this finds one trajectory of a big file by reading only the id column, then that row.
 */
export async function readTrajectoryRows(file: string, rows: readonly number[]): Promise<Trajectory[]> {
  const handle = await openParquetFile(file);
  const out: Trajectory[] = [];
  for (const row of rows) {
    const table = tableFromIPC((await handle.read({ offset: row, limit: 1 })).intoIPCStream());
    for (const value of tableRows(table)) out.push(parseTrajectory(trajectoryFromParquetRow(value), `${file}: row ${row}`));
  }
  return out;
}
