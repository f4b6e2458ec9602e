/**
 * Trajectory files: what is written is read back exactly, in parquet and JSONL; an unfinished output (a killed run)
 * is readable and resumable without losing or duplicating a record.
 */
import { describe, expect, it } from "vitest";
import { appendFileSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { openTrajectoryWriter, readTrajectories, type TrajectoryWriter } from "../src/data/trajectory-store.js";
import { readParquetInfo } from "../src/data/parquet.js";
import { rewritePartWithout } from "../src/data/trajectory-compaction.js";
import { journalLine } from "../src/data/trajectory-journal.js";
import { makeTrajectory } from "./helpers/trajectories.js";
import { pythonJson } from "./helpers/python.js";
import type { Trajectory } from "../src/data/trajectory.js";
import { tempDir } from "./helpers/tmp.js";

const tmp = () => tempDir("traj");
/** A write, then every part it queued on disk: the crash states below are built from known part boundaries. */
async function writeSettled(writer: TrajectoryWriter, trajectory: Trajectory): Promise<void> {
  await writer.write(trajectory);
  await writer.settled();
}
async function readAll(file: string): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for await (const t of readTrajectories(file)) out.push(t);
  return out;
}

describe.each(["parquet", "jsonl"])("trajectory store (%s)", (ext) => {
  it("round-trips records exactly, across several row groups", async () => {
    const file = path.join(tmp(), `t.${ext}`);
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 3 });
    const records = Array.from({ length: 10 }, (_, i) => makeTrajectory(i));
    for (const t of records) await writer.write(t);
    await writer.close();
    const back = await readAll(file);
    // float32 logprobs: the test values are exact in float32.
    expect(back).toEqual(records);
    expect(existsSync(`${file}.parts`)).toBe(false);
  });

  it("round-trips messages of any shape, and structured fields in every form they take", async () => {
    const file = path.join(tmp(), `odd.${ext}`);
    const records = [
      makeTrajectory(0, {
        messages: [
          { role: "user", content: [{ type: "text", text: "parts" }], tag: { nested: [1, null] } },
          { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "[1, 2]" } }] },
          { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "g", arguments: {} }, index: 0 }] },
          { role: "tool", content: "r", tool_call_id: "c1", name: "f" },
          { role: "assistant", content: "x", reasoning_content: "why" },
        ],
        reward_extra: { acc: 0.5, s: "é", list: [1, { a: null }], none: null },
        tool_scores: {},
        drift: "drift",
        drift_detail: { status: "drift", mode: "strict", firstDifference: 3, accumulatedLength: 5, renderedLength: 6, accumulatedExcerpt: "a\n", renderedExcerpt: "🙂" },
      }),
      makeTrajectory(1, { segments: [{ kind: "tool", turn: 0, start: 0, end: 1, text: "t", tool_name: "f,g", arguments: [{ x: 1 }, {}], latency_ms: 1, error: null, finish_reason: null }] }),
    ];
    const writer = await openTrajectoryWriter(file);
    for (const t of records) await writer.write(t);
    await writer.close();
    expect(await readAll(file)).toEqual(records);
  });

  it("an unclosed output (a killed run) is readable, and --resume continues it without duplicates", async () => {
    const file = path.join(tmp(), `t.${ext}`);
    const first = await openTrajectoryWriter(file, { rowGroupSize: 4 });
    for (let i = 0; i < 6; i++) await first.write(makeTrajectory(i));
    // no close(): the process "died" here
    expect((await readAll(file)).map((t) => t.id)).toHaveLength(6);
    await expect(openTrajectoryWriter(file, {})).rejects.toThrow(/already exists/);
    const second = await openTrajectoryWriter(file, { resume: true, rowGroupSize: 4 });
    expect([...second.existingIds].sort()).toEqual(Array.from({ length: 6 }, (_, i) => makeTrajectory(i).id).sort());
    for (let i = 6; i < 11; i++) await second.write(makeTrajectory(i));
    await second.close();
    const ids = (await readAll(file)).map((t) => t.id);
    expect(ids).toHaveLength(11);
    expect(new Set(ids).size).toBe(11);
  });

  it("keeps trajectories that finish while a part is being written (writes not awaited one by one)", async () => {
    const file = path.join(tmp(), `t.${ext}`);
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 3 });
    const writes: Promise<void>[] = [];
    for (let i = 0; i < 20; i++) {
      writes.push(writer.write(makeTrajectory(i)));
      // Let a started part write reach its file I/O before the next trajectory arrives.
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(writes);
    expect((await readAll(file)).map((t) => t.id).sort()).toEqual(Array.from({ length: 20 }, (_, i) => makeTrajectory(i).id).sort());
    await writer.close();
    expect((await readAll(file)).map((t) => t.id)).toHaveLength(20);
  });

  it("a write that resolved is on disk: lines of one event-loop turn go out together, before their writes resolve", async () => {
    const file = path.join(tmp(), `t.${ext}`);
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 100 });
    const journal = ext === "jsonl" ? file : path.join(`${file}.parts`, "pending.jsonl");
    const lines = () => readFileSync(journal, "utf8").split("\n").filter(Boolean).length;
    const batch = [0, 1, 2].map((i) => writer.write(makeTrajectory(i)));
    // Not yet: the turn's lines are written after its callbacks, in one write.
    expect(lines()).toBe(0);
    await batch[0];
    expect(lines()).toBe(3);
    await Promise.all(batch);
    await writer.write(makeTrajectory(3));
    expect(lines()).toBe(4);
    await writer.close();
    expect((await readAll(file)).map((t) => t.id).sort()).toEqual([0, 1, 2, 3].map((i) => makeTrajectory(i).id).sort());
  });

  it("writes a turn's batch larger than one writev(2) takes whole and in order", async () => {
    const file = path.join(tmp(), `t.${ext}`);
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 1000 });
    const journal = ext === "jsonl" ? file : path.join(`${file}.parts`, "pending.jsonl");
    await Promise.all(range(600).map((i) => writer.write(makeTrajectory(i))));
    const ids = readFileSync(journal, "utf8").split("\n").filter(Boolean).map((line) => (JSON.parse(line) as Trajectory).id);
    expect(ids).toEqual(range(600).map(idOf));
    await writer.close();
  });

  it("drops a torn last line left by a kill mid-write", async () => {
    const file = path.join(tmp(), `t.${ext}`);
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 100 });
    for (let i = 0; i < 3; i++) await writer.write(makeTrajectory(i));
    const journal = ext === "jsonl" ? file : path.join(`${file}.parts`, "pending.jsonl");
    appendFileSync(journal, '{"format_version": 1, "id": "torn');
    const resumed = await openTrajectoryWriter(file, { resume: true });
    expect(resumed.existingIds.size).toBe(3);
    await resumed.write(makeTrajectory(3));
    await resumed.close();
    expect((await readAll(file)).map((t) => t.id)).toEqual([0, 1, 2, 3].map((i) => makeTrajectory(i).id));
  });
});

describe("trajectory parquet", () => {
  it("a write resolves once its journal line is written, while the part it queued is still being written", async () => {
    const file = path.join(tmp(), "t.parquet");
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 2 });
    await writer.write(makeTrajectory(0));
    const order: string[] = [];
    // The second trajectory fills a part: its write must not wait for the part's file (an fsync), or a rollout slot
    // stands idle, holding the finished trajectory, until the part is on disk.
    const write = writer.write(makeTrajectory(1)).then(() => order.push("write"));
    const part = writer.settled().then(() => order.push("part on disk"));
    await Promise.all([write, part]);
    expect(order).toEqual(["write", "part on disk"]);
    expect(readdirSync(`${file}.parts`)).toContain("part-000001.parquet");
    await writer.close();
    expect((await readAll(file)).map((t) => t.id)).toEqual([0, 1].map(idOf));
  });

  it("a part that cannot be written fails the writes after it and close(), naming the cause", async () => {
    const file = path.join(tmp(), "t.parquet");
    const partsDir = `${file}.parts`;
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 2 });
    await writer.write(makeTrajectory(0));
    // The parts folder replaced by a file: the part's journal cannot be moved beside it.
    rmSync(partsDir, { recursive: true, force: true });
    writeFileSync(partsDir, "not a folder");
    await writer.write(makeTrajectory(1)).catch(() => undefined);
    await expect(writer.settled()).rejects.toThrow(/ENOENT|ENOTDIR/);
    await expect(writer.write(makeTrajectory(2))).rejects.toThrow(/ENOENT|ENOTDIR/);
    await expect(writer.close()).rejects.toThrow(/ENOENT|ENOTDIR/);
  });

  it("a record the file cannot hold is refused whole, naming the column: nothing journaled, the writer goes on", async () => {
    const file = path.join(tmp(), "t.parquet");
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 2 });
    await writer.write(makeTrajectory(0));
    const bad = { ...makeTrajectory(1), finish_reason: 7 } as unknown as Trajectory;
    await expect(writer.write(bad)).rejects.toThrow("parquet column finish_reason: expected a string, got number");
    expect(readFileSync(path.join(`${file}.parts`, "pending.jsonl"), "utf8").trim().split("\n")).toHaveLength(1);
    await writer.write(makeTrajectory(2));
    await writer.close();
    expect((await readAll(file)).map((t) => t.id)).toEqual([0, 2].map(idOf));
  });

  it("many writers at once still fill whole row groups (a part per arrival made one row group per trajectory or two)", async () => {
    const file = path.join(tmp(), "t.parquet");
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 32 });
    // 256 slots each awaiting its own write, as runRollout's slots do at concurrency 256.
    let next = 0;
    await Promise.all(
      Array.from({ length: 256 }, async () => {
        while (next < 1024) await writer.write(makeTrajectory(next++));
      }),
    );
    await writer.close();
    const info = await readParquetInfo(file);
    expect(info.numRows).toBe(1024);
    // 1024 / 32 = 32 full groups; a part taking more than 32 rows may end in one partial group.
    expect(info.numRowGroups).toBeLessThanOrEqual(2 * (1024 / 32));
  });

  it("resuming a finished file appends to it", async () => {
    const file = path.join(tmp(), "t.parquet");
    const a = await openTrajectoryWriter(file);
    await a.write(makeTrajectory(0));
    await a.close();
    const b = await openTrajectoryWriter(file, { resume: true });
    expect(b.existingIds.has(makeTrajectory(0).id)).toBe(true);
    await b.write(makeTrajectory(1));
    await b.close();
    expect((await readAll(file)).map((t) => t.id)).toEqual(["0:0", "0:1"]);
    expect(readdirSync(path.dirname(file))).toEqual(["t.parquet"]);
  });

  it("pyarrow reads the token columns with compact types", async () => {
    const file = path.join(tmp(), "t.parquet");
    const w = await openTrajectoryWriter(file, { rowGroupSize: 2 });
    for (let i = 0; i < 5; i++) await w.write(makeTrajectory(i));
    await w.close();
    const info = pythonJson<{ rows: number; groups: number; types: Record<string, string>; chunkStats: boolean[] }>(
      `import json, sys, pyarrow.parquet as pq
f = pq.ParquetFile(sys.argv[1]); s = f.schema_arrow; m = f.metadata
chunks = [m.row_group(g).column(c) for g in range(m.num_row_groups) for c in range(m.num_columns)]
print(json.dumps({"rows": m.num_rows, "groups": m.num_row_groups, "types": {n: str(s.field(n).type) for n in ("response_ids", "response_mask", "response_logprobs")},
  "chunkStats": sorted({c.is_stats_set for c in chunks})}))`,
      [file],
    );
    expect(info.rows).toBe(5);
    expect(info.groups).toBe(3);
    expect(info.types).toEqual({
      response_ids: "list<element: int32 not null>",
      response_mask: "list<element: int8 not null>",
      response_logprobs: "list<element: float not null>",
    });
    // Every row group keeps its min/max: readers prune on them.
    expect(info.chunkStats).toEqual([true]);
  });

  it("writes parts without page statistics (the merge drops the page index; computing it cost a third of a part)", async () => {
    const file = path.join(tmp(), "t.parquet");
    const w = await openTrajectoryWriter(file, { rowGroupSize: 2 });
    for (let i = 0; i < 3; i++) await w.write(makeTrajectory(i));
    await w.settled();
    const part = path.join(`${file}.parts`, "part-000001.parquet");
    const chunks = pythonJson<{ stats: boolean; columnIndex: boolean }[]>(
      `import json, sys, pyarrow.parquet as pq
m = pq.ParquetFile(sys.argv[1]).metadata
print(json.dumps([{"stats": c.is_stats_set, "columnIndex": c.has_column_index} for g in range(m.num_row_groups) for c in (m.row_group(g).column(i) for i in range(m.num_columns))]))`,
      [part],
    );
    await w.close();
    expect(chunks.length).toBeGreaterThan(0);
    expect(new Set(chunks.map((c) => `stats ${c.stats}, page index ${c.columnIndex}`))).toEqual(new Set(["stats true, page index false"]));
  });
});

describe("trajectory parquet: a part's own journal", () => {
  // A part takes its rows with their journal, renamed pending-<part>.jsonl, and removes it once the part is on disk.
  it("killed while the part is written: its rows, in the part's journal alone, are read and resumed", async () => {
    const file = path.join(tmp(), "t.parquet");
    const partsDir = `${file}.parts`;
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 4 });
    for (const i of range(3)) await writer.write(makeTrajectory(i));
    // The state a kill leaves right after part 1 took these rows: their journal renamed, the part not yet written.
    renameSync(path.join(partsDir, "pending.jsonl"), path.join(partsDir, "pending-000001.jsonl"));
    expect(sortedIds(await readAll(file))).toEqual(range(3).map(idOf).sort());
    const resumed = await openTrajectoryWriter(file, { resume: true, rowGroupSize: 4 });
    expect([...resumed.existingIds].sort()).toEqual(range(3).map(idOf).sort());
    // Joined into pending.jsonl before the part's journal goes.
    expect(readdirSync(partsDir).sort()).toEqual(["pending.jsonl"]);
    await resumed.write(makeTrajectory(3));
    await resumed.close();
    expect(sortedIds(await readAll(file))).toEqual(range(4).map(idOf).sort());
  });

  it("killed after the part is on disk, before its journal is removed: each record once, and resume removes it", async () => {
    const file = path.join(tmp(), "t.parquet");
    const partsDir = `${file}.parts`;
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 2 });
    for (const i of range(5)) await writeSettled(writer, makeTrajectory(i));
    expect(readdirSync(partsDir).sort()).toEqual(["part-000001.parquet", "part-000002.parquet", "pending.jsonl"]);
    writeFileSync(path.join(partsDir, "pending-000002.jsonl"), [2, 3].map((i) => `${journalLine(makeTrajectory(i))}\n`).join(""));
    const seen = await readAll(file);
    expect(seen.map((t) => t.id).sort()).toEqual(range(5).map(idOf).sort());
    const resumed = await openTrajectoryWriter(file, { resume: true, rowGroupSize: 2 });
    expect([...resumed.existingIds].sort()).toEqual(range(5).map(idOf).sort());
    expect(readdirSync(partsDir).sort()).toEqual(["part-000001.parquet", "part-000002.parquet", "pending.jsonl"]);
    await resumed.close();
    expect((await readAll(file)).map((t) => t.id).sort()).toEqual(range(5).map(idOf).sort());
  });

  it("a part's journal holding a failed trajectory: resume removes it from disk and the caller redoes it", async () => {
    const file = path.join(tmp(), "t.parquet");
    const partsDir = `${file}.parts`;
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 4 });
    for (const i of range(3)) await writer.write(i === 1 ? failed(i) : makeTrajectory(i));
    renameSync(path.join(partsDir, "pending.jsonl"), path.join(partsDir, "pending-000001.jsonl"));
    const resumed = await openTrajectoryWriter(file, { resume: true, rowGroupSize: 4 });
    expect(resumed.removedFailed).toBe(1);
    expect([...resumed.existingIds].sort()).toEqual([0, 2].map(idOf).sort());
    expect(readdirSync(partsDir).sort()).toEqual(["pending.jsonl"]);
    expect(sortedIds(await readAll(file))).toEqual([0, 2].map(idOf).sort());
    await resumed.write(makeTrajectory(1));
    await resumed.close();
    const all = await readAll(file);
    expect(sortedIds(all)).toEqual(range(3).map(idOf).sort());
    expect(all.every((t) => t.status === "completed")).toBe(true);
  });
});

/** Record i, failed the way a server error after every retry ends it. */
const failed = (i: number) => makeTrajectory(i, { status: "failed", finish_reason: "error", error: "HTTP 503" });
const idOf = (i: number) => makeTrajectory(i).id;
const sortedIds = (records: Trajectory[]) => records.map((t) => t.id).sort();
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

describe.each(["parquet", "jsonl"])("resume and failed trajectories (%s)", (ext) => {
  // rowGroupSize 4 puts failed 1 in a parquet part and failed 4 in the pending journal; "closed" resumes a finished
  // file (parquet: it becomes part 0), "killed" an unclosed one.
  const FAILED = [1, 4];
  async function firstRun(file: string, close: boolean): Promise<void> {
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 4 });
    for (const i of range(6)) await writer.write(FAILED.includes(i) ? failed(i) : makeTrajectory(i));
    if (close) await writer.close();
  }

  it.each([["killed"], ["closed"]])("resume (%s run) removes failed ones so they are redone, one record per id", async (state) => {
    const file = path.join(tmp(), `t.${ext}`);
    await firstRun(file, state === "closed");
    const resumed = await openTrajectoryWriter(file, { resume: true, rowGroupSize: 4 });
    expect(resumed.removedFailed).toBe(2);
    expect(resumed.keptFailed).toBe(0);
    expect([...resumed.existingIds].sort()).toEqual([0, 2, 3, 5].map(idOf).sort());
    // Already on open, before anything is redone, the failed records are gone from disk.
    expect(sortedIds(await readAll(file))).toEqual([0, 2, 3, 5].map(idOf).sort());
    for (const i of FAILED) await resumed.write(makeTrajectory(i));
    await resumed.close();
    const all = await readAll(file);
    expect(sortedIds(all)).toEqual(range(6).map(idOf).sort());
    expect(all.map((t) => t.status)).toEqual(range(6).map(() => "completed"));
    expect(readdirSync(path.dirname(file))).toEqual([`t.${ext}`]);
  });

  it("keepFailed keeps failed ones on disk and among the ids to skip", async () => {
    const file = path.join(tmp(), `t.${ext}`);
    await firstRun(file, false);
    const resumed = await openTrajectoryWriter(file, { resume: true, keepFailed: true, rowGroupSize: 4 });
    expect(resumed.keptFailed).toBe(2);
    expect(resumed.removedFailed).toBe(0);
    expect([...resumed.existingIds].sort()).toEqual(range(6).map(idOf).sort());
    await resumed.write(makeTrajectory(6));
    await resumed.close();
    const all = await readAll(file);
    expect(sortedIds(all)).toEqual(range(7).map(idOf).sort());
    expect(all.filter((t) => t.status === "failed").map((t) => t.id).sort()).toEqual(FAILED.map(idOf).sort());
  });

  it("a resume without failed records keeps every record as it was", async () => {
    const file = path.join(tmp(), `t.${ext}`);
    const records = range(3).map((i) => makeTrajectory(i));
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 4 });
    for (const t of records) await writer.write(t);
    await writer.close();
    const resumed = await openTrajectoryWriter(file, { resume: true, rowGroupSize: 4 });
    expect(resumed.removedFailed).toBe(0);
    expect(resumed.existingIds.size).toBe(3);
    await resumed.close();
    expect(await readAll(file)).toEqual(records);
  });
});

describe("resume killed while it removes failed trajectories", () => {
  it("parquet: some parts rewritten, others and the journal not: readers see each kept record once, the next resume ends right", async () => {
    const file = path.join(tmp(), "t.parquet");
    const partsDir = `${file}.parts`;
    // rowGroupSize 2: parts 1-3 hold records 0-5, the journal 6. Failed: 1 (part 1), 3 (part 2), 6 (journal).
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 2 });
    for (const i of range(7)) await writeSettled(writer, [1, 3, 6].includes(i) ? failed(i) : makeTrajectory(i));
    expect(readdirSync(partsDir).sort()).toEqual(["part-000001.parquet", "part-000002.parquet", "part-000003.parquet", "pending.jsonl"]);
    // The state a kill leaves mid-compaction: part 1 rewritten, part 2 not yet, the journal not yet, and the
    // temporary of a rewrite cut before its rename.
    await rewritePartWithout(path.join(partsDir, "part-000001.parquet"), (row) => row.status === "failed", 2);
    const staleTemp = path.join(partsDir, ".part-000002.parquet.tmp-4242-0badf00d");
    writeFileSync(staleTemp, "half a parquet file");

    const seen = await readAll(file);
    expect(new Set(seen.map((t) => t.id)).size).toBe(seen.length);
    expect(sortedIds(seen.filter((t) => t.status !== "failed"))).toEqual([0, 2, 4, 5].map(idOf).sort());
    expect(sortedIds(seen.filter((t) => t.status === "failed"))).toEqual([3, 6].map(idOf).sort());

    const resumed = await openTrajectoryWriter(file, { resume: true, rowGroupSize: 2 });
    // Failed 1 left the disk with the first attempt: it is redone without being counted again.
    expect(resumed.removedFailed).toBe(2);
    expect([...resumed.existingIds].sort()).toEqual([0, 2, 4, 5].map(idOf).sort());
    expect(existsSync(staleTemp)).toBe(false);
    for (const i of [1, 3, 6]) await resumed.write(makeTrajectory(i));
    await resumed.close();
    const all = await readAll(file);
    expect(sortedIds(all)).toEqual(range(7).map(idOf).sort());
    expect(all.every((t) => t.status === "completed")).toBe(true);
    expect(existsSync(partsDir)).toBe(false);
  });

  it("jsonl: killed before the rename, the old file is read whole and the next resume ends right", async () => {
    const dir = tmp();
    const file = path.join(dir, "t.jsonl");
    const writer = await openTrajectoryWriter(file);
    for (const i of range(4)) await writer.write(i === 2 ? failed(i) : makeTrajectory(i));
    await writer.close();
    // The rewrite's temporary, cut short: the file itself is untouched.
    const staleTemp = path.join(dir, ".t.jsonl.tmp-4242-0badf00d");
    writeFileSync(staleTemp, `${JSON.stringify(makeTrajectory(0))}\n{"format_ver`);
    expect(sortedIds(await readAll(file))).toEqual(range(4).map(idOf).sort());

    const resumed = await openTrajectoryWriter(file, { resume: true });
    expect(resumed.removedFailed).toBe(1);
    expect(existsSync(staleTemp)).toBe(false);
    await resumed.write(makeTrajectory(2));
    await resumed.close();
    const all = await readAll(file);
    expect(sortedIds(all)).toEqual(range(4).map(idOf).sort());
    expect(all.every((t) => t.status === "completed")).toBe(true);
    expect(readdirSync(dir)).toEqual(["t.jsonl"]);
  });
});

describe.each(["parquet", "jsonl"])("sample order (%s)", (ext) => {
  it("close() rewrites the file in data_index, sample_index order; without the option it keeps the order written", async () => {
    const order = [5, 2, 7, 0, 3, 6, 1, 4];
    for (const sampleOrder of [true, false]) {
      const file = path.join(tmp(), `t.${ext}`);
      const writer = await openTrajectoryWriter(file, { rowGroupSize: 3, sampleOrder });
      for (const i of order) await writer.write(makeTrajectory(i));
      await writer.close();
      // makeTrajectory(i) is row i / 2, sample i % 2: sample order is the order of i.
      const expected = sampleOrder ? [0, 1, 2, 3, 4, 5, 6, 7] : order;
      expect((await readAll(file)).map((t) => t.id)).toEqual(expected.map((i) => makeTrajectory(i).id));
    }
  });

  it("a resumed run's file is in sample order again once it closes", async () => {
    const file = path.join(tmp(), `t.${ext}`);
    const first = await openTrajectoryWriter(file, { rowGroupSize: 2, sampleOrder: true });
    for (const i of [6, 1, 4]) await first.write(makeTrajectory(i));
    await first.close();
    const resumed = await openTrajectoryWriter(file, { resume: true, rowGroupSize: 2, sampleOrder: true });
    for (const i of [5, 0, 3, 2]) await resumed.write(makeTrajectory(i));
    await resumed.close();
    expect((await readAll(file)).map((t) => t.id)).toEqual([0, 1, 2, 3, 4, 5, 6].map((i) => makeTrajectory(i).id));
  });
});
