/**
 * Trajectory files: what is written is read back exactly, in parquet and JSONL; an unfinished output (a killed run)
 * is readable and resumable without losing or duplicating a record.
 */
import { describe, expect, it } from "vitest";
import { appendFileSync, existsSync, mkdtempSync, readdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { openTrajectoryWriter, readTrajectories } from "../src/data/trajectory-store.js";
import { makeTrajectory } from "./helpers/trajectories.js";
import { pythonJson } from "./helpers/python.js";
import type { Trajectory } from "../src/data/trajectory.js";

const tmp = () => mkdtempSync(path.join(os.tmpdir(), "agentrl-traj-"));
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
    const info = pythonJson<{ rows: number; groups: number; types: Record<string, string> }>(
      `import json, sys, pyarrow.parquet as pq
f = pq.ParquetFile(sys.argv[1]); s = f.schema_arrow
print(json.dumps({"rows": f.metadata.num_rows, "groups": f.metadata.num_row_groups, "types": {n: str(s.field(n).type) for n in ("response_ids", "response_mask", "response_logprobs")}}))`,
      [file],
    );
    expect(info.rows).toBe(5);
    expect(info.groups).toBe(3);
    expect(info.types).toEqual({
      response_ids: "list<element: int32 not null>",
      response_mask: "list<element: int8 not null>",
      response_logprobs: "list<element: float not null>",
    });
  });
});
