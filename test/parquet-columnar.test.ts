/**
 * agentrl's own parquet writer (src/data/parquet-columnar.ts, parquet-shred.ts, parquet-pages.ts) must write the
 * file parquet-wasm writes, as readers see it: the same rows back through parquet-wasm and through pyarrow, the same
 * arrow schema, whole row groups, statistics, and a schema parquet-concat joins with parquet-wasm's parts. Trajectories
 * here cover what the striping has to get right: nulls at every depth, empty and typed lists, nested lists of
 * structs (a context segment's messages' tool calls), NaN, non-ASCII text.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ColumnarParquet } from "../src/data/parquet-columnar.js";
import { concatParquetFiles } from "../src/data/parquet-concat.js";
import { encodeLevels } from "../src/data/parquet-levels.js";
import { readParquetInfo, streamParquetRows, writeParquetRows } from "../src/data/parquet.js";
import { TRAJECTORY_PARQUET, trajectoryArrowSchema, type Trajectory } from "../src/data/trajectory.js";
import { trajectoryParquetRow } from "../src/data/trajectory-encoding.js";
import { makeTrajectory } from "./helpers/trajectories.js";
import { pythonJson } from "./helpers/python.js";
import { tempDir } from "./helpers/tmp.js";

/** Trajectories whose values exercise every level of the schema. */
function edgeCases(): Trajectory[] {
  const all = Array.from({ length: 11 }, (_, i) => makeTrajectory(i));
  all[1]!.messages[0]!.content = "héllo ✓ 😀 — ünïcode";
  all[2]!.response_ids = [];
  all[2]!.response_mask = [];
  all[2]!.response_logprobs = [];
  all[2]!.segments = [];
  all[3]!.trainer_logprobs = [-1, -2, Number.NaN, 0, -0.5];
  all[4]!.drift = "mismatch";
  all[4]!.drift_detail = { status: "mismatch", mode: "strict", firstDifference: 3, accumulatedLength: 10, renderedLength: 11, accumulatedExcerpt: "a", renderedExcerpt: "" };
  all[5]!.messages.push({ role: "assistant", content: [{ type: "text", text: "parts" }], refusal: null } as never);
  all[6]!.messages[1]!.tool_calls = [
    { id: "call_1", type: "function", function: { name: "calc", arguments: { x: 1 } } },
    { id: "call_2", type: "function", function: { name: "calc", arguments: { y: [1, 2] } } },
  ];
  all[7]!.data_index = 2 ** 40 + 7;
  all[8]!.step = 3;
  all[8]!.advantage = -0.25;
  all[9]!.context_segments = [
    { prompt_ids: [1], response_ids: [], response_mask: [], response_logprobs: [], messages: [], reason: "empty", drift: "match" },
    {
      prompt_ids: [1, 2],
      response_ids: [3],
      response_mask: [1],
      response_logprobs: [-0.5],
      messages: [{ role: "assistant", content: null, tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: {} } }] }],
      reason: "message 1 differs",
      drift: "match",
    },
  ] as never;
  all[10]!.tool_scores = {};
  return all;
}

/** Rows as the trajectory writer gives them: token lists typed, as journalEntry leaves them, for some. */
const rowsOf = (trajectories: readonly Trajectory[]) =>
  trajectories.map((t, i) => trajectoryParquetRow(i % 2 === 0 ? t : { ...t, prompt_ids: Int32Array.from(t.prompt_ids), response_mask: Int8Array.from(t.response_mask) }));

async function readRows(file: string): Promise<Record<string, unknown>[]> {
  const rows: Record<string, unknown>[] = [];
  for await (const { row } of streamParquetRows(file)) rows.push(row);
  return rows;
}

/** NaN survives JSON as text, so two row lists compare whole. */
const asJson = (value: unknown) => JSON.stringify(value, (_, v: unknown) => (typeof v === "number" && Number.isNaN(v) ? "NaN" : v));

async function writeBoth(dir: string, rowGroupSize: number): Promise<{ ours: string; wasm: string }> {
  const rows = rowsOf(edgeCases());
  const writer = await ColumnarParquet.open(trajectoryArrowSchema, { compression: "zstd", rowGroupSize });
  for (const row of rows) writer.append(row);
  const ours = path.join(dir, "ours.parquet");
  writeFileSync(ours, writer.take());
  const wasm = path.join(dir, "wasm.parquet");
  await writeParquetRows(wasm, rows, trajectoryArrowSchema, TRAJECTORY_PARQUET(rowGroupSize));
  return { ours, wasm };
}

describe("agentrl's columnar parquet writer", () => {
  it("writes the rows parquet-wasm writes, in row groups of the size asked", async () => {
    const { ours, wasm } = await writeBoth(tempDir("pq-columnar"), 4);
    const [mine, theirs] = [await readRows(ours), await readRows(wasm)];
    expect(mine).toHaveLength(11);
    expect(asJson(mine)).toBe(asJson(theirs));
    expect((await readParquetInfo(ours)).numRowGroups).toBe(3);
  });

  it("pyarrow reads the same table and arrow schema from both files, with min/max on the record's own fields", async () => {
    const { ours, wasm } = await writeBoth(tempDir("pq-columnar"), 4);
    const result = pythonJson<{ schema: boolean; columns: string[]; minMax: Record<string, boolean>; createdBy: string }>(
      `import json, math, sys, pyarrow.parquet as pq
a, b = pq.read_table(sys.argv[1]), pq.read_table(sys.argv[2])
norm = lambda v: json.dumps(v, default=str).replace("NaN", "n")
m = pq.ParquetFile(sys.argv[1]).metadata
names = [m.row_group(0).column(c).path_in_schema for c in range(m.num_columns)]
stat = lambda name: m.row_group(0).column(names.index(name)).statistics
print(json.dumps({"schema": a.schema.equals(b.schema, check_metadata=True),
  "columns": [n for n in a.column_names if norm(a[n].to_pylist()) != norm(b[n].to_pylist())],
  "minMax": {n: stat(n).has_min_max for n in ("data_index", "id", "reward", "response_ids.list.element")},
  "createdBy": m.created_by}))`,
      [ours, wasm],
    );
    expect(result.schema).toBe(true);
    expect(result.columns).toEqual([]);
    expect(result.minMax).toEqual({ data_index: true, id: true, reward: true, "response_ids.list.element": false });
    expect(result.createdBy).toMatch(/^agentrl version /);
  });

  it("shares its schema with parquet-wasm's files, so parquet-concat joins them as they are", async () => {
    const dir = tempDir("pq-columnar");
    const { ours, wasm } = await writeBoth(dir, 4);
    const joined = path.join(dir, "joined.parquet");
    expect(await concatParquetFiles([ours, wasm], joined)).toBe(true);
    const rows = await readRows(joined);
    expect(rows.map((row) => row["id"])).toEqual([...edgeCases(), ...edgeCases()].map((t) => t.id));
  });

  it("refuses a value of the wrong kind naming its column, and takes the row back whole", async () => {
    const writer = await ColumnarParquet.open(trajectoryArrowSchema, { compression: "none", rowGroupSize: 8 });
    const good = rowsOf([makeTrajectory(0), makeTrajectory(1)]);
    writer.append(good[0]!);
    // A late column fails after the earlier ones took their values: those must be taken back.
    expect(() => writer.append({ ...good[1]!, drift: 5 })).toThrow("parquet column drift: expected a string, got number");
    expect(() => writer.append({ ...good[1]!, segments: [{ ...(good[1]!["segments"] as object[])[0], turn: "x" }] })).toThrow(
      "parquet column segments.list.element.turn: expected a number, got string",
    );
    expect(() => writer.append({ ...good[1]!, status: null })).toThrow("parquet column status: a value is required");
    writer.append(good[1]!);
    expect(writer.rows).toBe(2);
    const file = path.join(tempDir("pq-columnar"), "t.parquet");
    writeFileSync(file, writer.take());
    expect((await readRows(file)).map((row) => row["id"])).toEqual([makeTrajectory(0).id, makeTrajectory(1).id]);
    expect(writer.rows).toBe(0);
  });

  it("encodes levels as runs, each a varint header (run length × 2) and a byte, after their length", () => {
    const levels = Uint8Array.from([0, ...Array<number>(200).fill(1), 0, 2]);
    expect([...encodeLevels(levels)]).toEqual([9, 0, 0, 0, 2, 0, 0x90, 0x03, 1, 2, 0, 2, 2]);
  });
});
