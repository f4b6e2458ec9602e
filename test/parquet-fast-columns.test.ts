/**
 * src/data/arrow-columns.ts builds trajectory columns straight into arrow buffers. Each column must equal what
 * apache-arrow's own builders make of the same values (types, values, nulls), on values chosen to be awkward:
 * missing values, empty lists, unicode, lone surrogates, float32 rounding, structs with missing fields. Where a value
 * does not fit (a number in a string column), the fast path declines and the builder's result stands.
 */
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { Field, Float32, Float64, Int8, Int32, List, makeBuilder, Schema, Struct, Utf8, Vector, type DataType } from "apache-arrow";
import { fastColumn, flatColumn, listColumn } from "../src/data/arrow-columns.js";
import path from "node:path";
import { streamParquetRows, writeParquetRows } from "../src/data/parquet.js";
import { tempDir } from "./helpers/tmp.js";

/** The column arrow's builder makes of `values`, as plain values. */
function built(type: DataType, values: readonly unknown[]): unknown[] {
  const builder = makeBuilder({ type, nullValues: [null, undefined] });
  for (const value of values) builder.append(value as never);
  return plain(builder.finish().toVector());
}

function plain(vector: Vector): unknown[] {
  return [...vector].map((value) => (value !== null && typeof value === "object" && "toJSON" in value ? JSON.parse(JSON.stringify(value)) : value));
}

const text = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.string({ unit: "binary", maxLength: 6 }),
  fc.constantFrom("", "é", "日本語", "🙂", "\ud800", "a\udc00b", "<|im_end|>", "\n"),
);
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.oneof({ weight: 4, arbitrary: arb }, { weight: 1, arbitrary: fc.constantFrom(null, undefined) });
const int32 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
const float = fc.double({ noNaN: true });

const spanType = new Struct([new Field("start", new Int32()), new Field("end", new Int32()), new Field("label", new Utf8(), true), new Field("ms", new Float64(), true)]);
const span = fc.record({ start: int32, end: int32, label: maybe(text), ms: maybe(float) }, { requiredKeys: ["start", "end"] });

describe("fast arrow columns equal arrow's builders", () => {
  it("strings, with missing values and any unicode", () => {
    fc.assert(
      fc.property(fc.array(maybe(text), { maxLength: 40 }), (values) => {
        expect(plain(new Vector([flatColumn(new Utf8(), values)!]))).toEqual(built(new Utf8(), values));
      }),
      { numRuns: 300, seed: 11 },
    );
  });

  it("int8, int32, float32 and float64 values, with missing values", () => {
    for (const [type, arb] of [[new Int8(), fc.integer({ min: -128, max: 127 })], [new Int32(), int32], [new Float32(), float], [new Float64(), float]] as const) {
      fc.assert(
        fc.property(fc.array(maybe(arb as fc.Arbitrary<number>), { maxLength: 40 }), (values) => {
          expect(plain(new Vector([flatColumn(type, values)!]))).toEqual(built(type, values));
        }),
        { numRuns: 100, seed: 12 },
      );
    }
  });

  it("lists of numbers and lists of structs, with missing and empty lists", () => {
    const cases: Array<[DataType, fc.Arbitrary<unknown>]> = [
      [new List(new Field("item", new Int32())), fc.array(int32, { maxLength: 8 })],
      [new List(new Field("item", new Float32())), fc.array(float, { maxLength: 8 })],
      [new List(new Field("item", spanType)), fc.array(span, { maxLength: 4 })],
    ];
    for (const [type, arb] of cases) {
      fc.assert(
        fc.property(fc.array(maybe(arb), { maxLength: 20 }), (lists) => {
          expect(plain(new Vector([listColumn(type, lists)!]))).toEqual(built(type, lists));
        }),
        { numRuns: 150, seed: 13 },
      );
    }
  });

  it("lists of numbers given as typed arrays of the column's type (the writer's pending rows), mixed with arrays", () => {
    const cases: Array<[DataType, fc.Arbitrary<number[]>, (values: number[]) => ArrayLike<number>]> = [
      [new List(new Field("item", new Int32())), fc.array(int32, { maxLength: 8 }), (v) => Int32Array.from(v)],
      [new List(new Field("item", new Int8())), fc.array(fc.integer({ min: -128, max: 127 }), { maxLength: 8 }), (v) => Int8Array.from(v)],
      [new List(new Field("item", new Float32())), fc.array(float, { maxLength: 8 }), (v) => Float32Array.from(v)],
    ];
    for (const [type, arb, typed] of cases) {
      fc.assert(
        fc.property(fc.array(fc.tuple(maybe(arb), fc.boolean()), { maxLength: 20 }), (pairs) => {
          const lists = pairs.map(([values, asTyped]) => (asTyped && Array.isArray(values) ? typed(values) : values));
          const column = listColumn(type, lists);
          expect(column).toBeDefined();
          expect(plain(new Vector([column!]))).toEqual(built(type, pairs.map(([values]) => values)));
        }),
        { numRuns: 150, seed: 17 },
      );
    }
  });

  it("structs and lists nested to any depth (a chat message's tool calls), and a nullable struct column", () => {
    const fnType = new Struct([new Field("name", new Utf8()), new Field("arguments", new Utf8())]);
    const callType = new Struct([new Field("id", new Utf8(), true), new Field("function", fnType)]);
    const messageType = new Struct([
      new Field("role", new Utf8()),
      new Field("content", new Utf8(), true),
      new Field("tool_calls", new List(new Field("item", callType)), true),
    ]);
    const call = fc.record({ id: maybe(text), function: fc.record({ name: text, arguments: text }) }, { requiredKeys: ["function"] });
    const message = fc.record({ role: text, content: maybe(text), tool_calls: maybe(fc.array(call, { maxLength: 3 })) }, { requiredKeys: ["role"] });
    const messages = new Field("messages", new List(new Field("item", messageType)), true);
    fc.assert(
      fc.property(fc.array(maybe(fc.array(message, { maxLength: 4 })), { maxLength: 12 }), (lists) => {
        expect(plain(new Vector([fastColumn(messages, lists)!]))).toEqual(built(messages.type, lists));
      }),
      { numRuns: 60, seed: 14 },
    );
    const detail = new Field("detail", spanType, true);
    fc.assert(
      fc.property(fc.array(maybe(span), { maxLength: 20 }), (values) => {
        expect(plain(new Vector([fastColumn(detail, values)!]))).toEqual(built(detail.type, values));
      }),
      { numRuns: 60, seed: 15 },
    );
    // A missing struct where the field is not nullable (a list's item) is left to the builder.
    expect(fastColumn(new Field("x", spanType, false), [null])).toBeUndefined();
  });

  it("declines values that do not fit, so arrow's builder takes the column", () => {
    expect(flatColumn(new Utf8(), ["a", 1])).toBeUndefined();
    expect(flatColumn(new Int32(), [1, "2"])).toBeUndefined();
    expect(listColumn(new List(new Field("item", new Int32())), [[1], "x"])).toBeUndefined();
    expect(listColumn(new List(new Field("item", spanType)), [[null]])).toBeUndefined();
    expect(listColumn(new List(new Field("item", spanType)), [[{ start: 1, end: 2, label: 3 }]])).toBeUndefined();
  });

  it("rows go through parquet and back unchanged, fast columns and builder columns together", async () => {
    const schema = new Schema([
      new Field("id", new Utf8()),
      new Field("note", new Utf8(), true),
      new Field("ids", new List(new Field("item", new Int32()))),
      new Field("spans", new List(new Field("item", spanType)), true),
      new Field("nested", new List(new Field("item", new List(new Field("item", new Int32())))), true),
    ]);
    const rows = [
      { id: "0:0", note: null, ids: [1, 2, 3], spans: [{ start: 0, end: 2, label: "a", ms: 1.5 }], nested: [[1], []] },
      { id: "日本:🙂", note: "x", ids: [], spans: null, nested: null },
      { id: "", note: undefined, ids: [2 ** 31 - 1], spans: [], nested: [[]] },
    ];
    const file = path.join(tempDir("fast-columns"), "t.parquet");
    await writeParquetRows(file, rows, schema);
    const back: Record<string, unknown>[] = [];
    for await (const { row } of streamParquetRows(file)) back.push(row);
    expect(back).toEqual([
      { id: "0:0", note: null, ids: [1, 2, 3], spans: [{ start: 0, end: 2, label: "a", ms: 1.5 }], nested: [[1], []] },
      { id: "日本:🙂", note: "x", ids: [], spans: null, nested: null },
      { id: "", note: null, ids: [2 ** 31 - 1], spans: [], nested: [[]] },
    ]);
  });
});
