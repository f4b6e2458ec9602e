/**
 * Joining trajectory parts by copying row groups (src/data/parquet-concat.ts) must give the file a re-encode gives:
 * the same rows in the same order, readable by parquet-wasm (which also reads the page index, so a stale one
 * would show) and by pyarrow. The footer codec must write back exactly the bytes it read. Parts that do not share
 * a schema are refused, so the caller re-encodes.
 */
import { readFileSync, existsSync } from "node:fs";
import path from "node:path";
import { Field, Int32, Schema, Utf8 } from "apache-arrow";
import { describe, expect, it } from "vitest";
import { concatParquetFiles } from "../src/data/parquet-concat.js";
import { streamParquetRows, writeParquetRows } from "../src/data/parquet.js";
import { readStruct, writeStruct, type ThriftList, type ThriftStruct } from "../src/data/thrift-compact.js";
import { trajectoryArrowSchema } from "../src/data/trajectory.js";
import { makeTrajectory } from "./helpers/trajectories.js";
import { pythonJson } from "./helpers/python.js";
import { tempDir } from "./helpers/tmp.js";

async function readRows(file: string): Promise<Record<string, unknown>[]> {
  const rows: Record<string, unknown>[] = [];
  for await (const { row } of streamParquetRows(file, { batchSize: 5 })) rows.push(row);
  return rows;
}

/** Parts of 1 to 7 trajectories, some of several row groups, as the trajectory writer makes them. */
async function writeParts(dir: string, sizes: readonly number[], rowGroupSize: number): Promise<{ files: string[]; count: number }> {
  const files: string[] = [];
  let next = 0;
  for (const [i, size] of sizes.entries()) {
    const file = path.join(dir, `part-${i}.parquet`);
    const rows = Array.from({ length: size }, () => makeTrajectory(next++));
    await writeParquetRows(file, rows, trajectoryArrowSchema, { compression: i % 2 === 0 ? "zstd" : "snappy", rowGroupSize });
    files.push(file);
  }
  return { files, count: next };
}

describe("parquet concatenation", () => {
  it("reads and writes back a real footer byte for byte", async () => {
    const dir = tempDir("pq-thrift");
    const { files } = await writeParts(dir, [7], 3);
    const bytes = readFileSync(files[0]!);
    const length = bytes.readUInt32LE(bytes.length - 8);
    const footer = bytes.subarray(bytes.length - 8 - length, bytes.length - 8);
    const { struct, end } = readStruct(footer);
    expect(end).toBe(footer.length);
    expect(Buffer.from(writeStruct(struct)).equals(footer)).toBe(true);
  });

  it("writes a struct's pre-encoded items (EncodedStruct) byte for byte as it writes their trees", async () => {
    // The merge keeps each part's row groups as bytes, not trees, so a long run's footer does not hold ~2.7 KB of
    // objects a trajectory at close.
    const { files } = await writeParts(tempDir("pq-thrift"), [7], 3);
    const bytes = readFileSync(files[0]!);
    const length = bytes.readUInt32LE(bytes.length - 8);
    const { struct } = readStruct(bytes.subarray(bytes.length - 8 - length, bytes.length - 8));
    const groups = struct.fields.find((f) => f.id === 4)!;
    const items = (groups.value as ThriftList).items as ThriftStruct[];
    expect(items).toHaveLength(3);
    const encoded = { ...struct, fields: struct.fields.map((f) => (f === groups ? { ...f, value: { ...(f.value as ThriftList), items: items.map((item) => ({ encoded: writeStruct(item) })) } } : f)) };
    expect(Buffer.from(writeStruct(encoded)).equals(Buffer.from(writeStruct(struct)))).toBe(true);
  });

  it("gives the rows of every part in order, each row group copied, readable by parquet-wasm and pyarrow", async () => {
    const dir = tempDir("pq-concat");
    // A part of no rows too: a resumed run's earlier file can be one.
    const sizes = [3, 1, 0, 7, 2, 5];
    const { files, count } = await writeParts(dir, sizes, 3);
    const out = path.join(dir, "joined.parquet");
    expect(await concatParquetFiles(files, out)).toBe(true);

    const expected: Record<string, unknown>[] = [];
    for (const file of files) expected.push(...(await readRows(file)));
    expect(expected).toHaveLength(count);
    expect(await readRows(out)).toEqual(expected);
    // The same rows as writing them all in one go.
    const whole = path.join(dir, "whole.parquet");
    await writeParquetRows(whole, Array.from({ length: count }, (_, i) => makeTrajectory(i)), trajectoryArrowSchema, { rowGroupSize: 3 });
    expect(await readRows(out)).toEqual(await readRows(whole));

    const info = pythonJson<{ rows: number; groups: number[]; ids: string[] }>(
      `import json, sys, pyarrow.parquet as pq
f = pq.ParquetFile(sys.argv[1])
print(json.dumps({"rows": f.metadata.num_rows, "groups": [f.metadata.row_group(i).num_rows for i in range(f.metadata.num_row_groups)], "ids": f.read().column("id").to_pylist()}))`,
      [out],
    );
    expect(info.rows).toBe(count);
    expect(info.groups).toEqual([3, 1, 3, 3, 1, 2, 3, 2]);
    expect(info.ids).toEqual(expected.map((row) => row.id));
  });

  it("refuses parts that do not share a schema, and writes nothing", async () => {
    const dir = tempDir("pq-concat-mixed");
    const { files } = await writeParts(dir, [2], 3);
    const other = path.join(dir, "other.parquet");
    const schema = new Schema([new Field("id", new Utf8(), false), new Field("n", new Int32(), false)]);
    await writeParquetRows(other, [{ id: "a", n: 1 }], schema);
    const out = path.join(dir, "joined.parquet");
    expect(await concatParquetFiles([...files, other], out)).toBe(false);
    expect(await concatParquetFiles([], out)).toBe(false);
    expect(existsSync(out)).toBe(false);
  });
});
