/**
 * List-of-number columns are built straight into arrow buffers (src/data/arrow-columns.ts); they must
 * read back exactly, with every element type the trajectory schema uses, with empty lists, and with a null row
 * (which takes the generic builder).
 */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { Field, Float32, Float64, Int8, Int32, Int64, List, Schema } from "apache-arrow";
import { streamParquetRows, writeParquetRows } from "../src/data/parquet.js";
import { tempDir } from "./helpers/tmp.js";

const list = (name: string, type: Int8 | Int32 | Int64 | Float32 | Float64, nullable = false) =>
  new Field(name, new List(new Field("item", type, true)), nullable);

async function roundTrip(rows: Record<string, unknown>[], schema: Schema): Promise<Record<string, unknown>[]> {
  const file = path.join(tempDir("lists"), "t.parquet");
  await writeParquetRows(file, rows, schema);
  const out: Record<string, unknown>[] = [];
  for await (const { row } of streamParquetRows(file)) out.push(row);
  return out;
}

describe("numeric list columns", () => {
  it("read back exactly for int8, int32, int64, float32 and float64, empty lists included", async () => {
    const schema = new Schema([list("mask", new Int8()), list("ids", new Int32()), list("big", new Int64()), list("lp", new Float32()), list("x", new Float64())]);
    const rows = [
      { mask: [0, 1, 1], ids: [151645, 0, -3], big: [2 ** 40, 1], lp: [-0.5, -0.25, 0], x: [Math.PI, -1e-300] },
      { mask: [], ids: [], big: [], lp: [], x: [] },
      { mask: [1], ids: [7], big: [3], lp: [-1.5], x: [2.5] },
    ];
    const back = await roundTrip(rows, schema);
    expect(back.map((r) => r.mask)).toEqual(rows.map((r) => r.mask));
    expect(back.map((r) => r.ids)).toEqual(rows.map((r) => r.ids));
    expect(back.map((r) => r.big)).toEqual(rows.map((r) => r.big));
    expect(back.map((r) => r.lp)).toEqual(rows.map((r) => r.lp)); // all exactly representable in float32
    expect(back.map((r) => r.x)).toEqual(rows.map((r) => r.x));
  });

  it("keeps a null list null", async () => {
    const schema = new Schema([list("lp", new Float32(), true)]);
    const back = await roundTrip([{ lp: [-0.5] }, { lp: null }, { lp: [] }], schema);
    expect(back.map((r) => r.lp)).toEqual([[-0.5], null, []]);
  });
});
