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

/** A seeded generator (mulberry32), so a failure names the seed and repeats. */
function randomness(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (below: number) => Math.floor(next() * below);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  const maybe = <T>(value: () => T): T | null => (next() < 0.3 ? null : value());
  const text = () => Array.from({ length: int(12) }, () => pick(["a", "Z", " ", "\n", "é", "✓", "😀", "\"", "0", "<tool_call>"])).join("");
  const list = <T>(item: () => T, max = 6): T[] => Array.from({ length: int(max + 1) }, item);
  return { next, int, pick, maybe, text, list };
}

/** A trajectory whose every nullable field, list length and text is drawn: nulls, empties and nesting in any mix. */
function randomTrajectory(i: number, r: ReturnType<typeof randomness>): Trajectory {
  const message = () =>
    r.pick([
      () => ({ role: "user", content: r.text() }),
      () => ({ role: "assistant", content: r.maybe(r.text), ...(r.next() < 0.5 ? { reasoning_content: r.text() } : {}), tool_calls: r.list(() => ({ id: `c${r.int(9)}`, type: "function", function: { name: r.text(), arguments: { x: r.int(100), s: r.text() } } }), 3) }),
      () => ({ role: "tool", content: r.text(), tool_call_id: `c${r.int(9)}`, name: r.text() }),
      () => ({ role: "assistant", content: [{ type: "text", text: r.text() }], refusal: null }),
    ])();
  const tokens = () => r.list(() => r.int(200_000) - 100, 40);
  return makeTrajectory(i, {
    ground_truth: r.maybe(r.text),
    error: r.maybe(r.text),
    data_index: r.pick([0, 7, 2 ** 33 + r.int(1000)]),
    prompt_ids: tokens(),
    response_ids: tokens(),
    response_mask: r.list(() => r.int(2), 40),
    response_logprobs: r.list(() => -r.next() * 5, 40),
    trainer_logprobs: r.maybe(() => r.list(() => -r.next(), 10)),
    segments: r.list(() => ({ kind: r.pick(["assistant", "tool", "user"] as const), turn: r.int(5), start: r.int(50), end: r.int(50), text: r.text(), tool_name: r.maybe(r.text), arguments: r.maybe(() => ({ a: r.text() })), latency_ms: r.maybe(() => r.next() * 100), error: r.maybe(r.text), finish_reason: r.maybe(() => "stop") })),
    calls: r.list(() => ({ turn: r.int(5), name: r.text(), arguments: { q: r.int(9) }, response: r.text(), latency_ms: r.next(), step_reward: r.maybe(r.next), error_kind: r.maybe(r.text), error: r.maybe(r.text) }), 3),
    messages: r.list(message, 5) as Trajectory["messages"],
    tool_rewards: r.list(() => r.next() - 0.5, 3),
    turn_scores: r.list(r.next, 3),
    tool_scores: r.maybe(() => Object.fromEntries(r.list(() => [r.text(), r.next()] as const, 3))),
    reward_extra: r.maybe(() => ({ acc: r.next() < 0.5, note: r.text() })),
    advantage: r.maybe(() => r.next() - 0.5),
    drift_detail: r.maybe(() => ({ status: "drift", mode: "strict", firstDifference: r.int(99), accumulatedLength: r.int(99), renderedLength: r.int(99), accumulatedExcerpt: r.text(), renderedExcerpt: r.text() })),
    server: r.maybe(r.text),
    weight_version: r.maybe(r.text),
    version_spans: r.maybe(() => r.list(() => ({ start: r.int(9), end: r.int(9), weight_version: r.maybe(r.text) }), 3)),
    context_segments: r.maybe(() => r.list(() => ({ prompt_ids: tokens(), response_ids: tokens(), response_mask: r.list(() => r.int(2), 9), response_logprobs: r.list(() => -r.next(), 9), messages: r.list(message, 3), reason: r.text(), drift: "match" }), 2)) as Trajectory["context_segments"],
    step: r.maybe(() => r.int(100)),
  });
}

describe("agentrl's columnar parquet writer", () => {
  it.each([1, 2, 3])("writes what parquet-wasm writes for 60 random trajectories (seed %i)", async (seed) => {
    const r = randomness(seed);
    const rows = Array.from({ length: 60 }, (_, i) => randomTrajectory(i, r)).map((t) => trajectoryParquetRow(t));
    const writer = await ColumnarParquet.open(trajectoryArrowSchema, { compression: "zstd", rowGroupSize: 16 });
    for (const row of rows) writer.append(row);
    const dir = tempDir("pq-columnar");
    const ours = path.join(dir, "ours.parquet");
    writeFileSync(ours, writer.take());
    const wasm = path.join(dir, "wasm.parquet");
    await writeParquetRows(wasm, rows, trajectoryArrowSchema, TRAJECTORY_PARQUET(16));
    expect(asJson(await readRows(ours))).toBe(asJson(await readRows(wasm)));
  });

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

  it("writers opened one after another share their schema's footer: the same rows give the same bytes, each metadata its own", async () => {
    const rows = rowsOf(edgeCases());
    const take = async (metadata?: Record<string, string>) => {
      const writer = await ColumnarParquet.open(trajectoryArrowSchema, { compression: "zstd", rowGroupSize: 4, ...(metadata ? { metadata } : {}) });
      for (const row of rows) writer.append(row);
      return writer.take();
    };
    const first = await take();
    const tagged = await take({ run: "a" });
    const again = await take();
    const taggedAgain = await take({ run: "b" });
    expect(Buffer.compare(first, again)).toBe(0);
    const dir = tempDir("pq-columnar");
    const files = { tagged: path.join(dir, "a.parquet"), taggedAgain: path.join(dir, "b.parquet") };
    writeFileSync(files.tagged, tagged);
    writeFileSync(files.taggedAgain, taggedAgain);
    // pyarrow reads the arrow schema's metadata (parquet-wasm's reader drops it).
    const runs = pythonJson<(string | null)[]>(
      `import json, sys, pyarrow.parquet as pq
print(json.dumps([(pq.read_schema(f).metadata or {}).get(b"run", b"").decode() or None for f in sys.argv[1:]]))`,
      [files.tagged, files.taggedAgain],
    );
    expect(runs).toEqual(["a", "b"]);
    expect(asJson(await readRows(files.taggedAgain))).toBe(asJson(await readRows(files.tagged)));
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
