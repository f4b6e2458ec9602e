import { describe, expect, it } from "vitest";
import { readStruct, T, writeStruct, type ThriftStruct } from "../src/data/thrift-compact.js";

/** The compact protocol's zigzag varint of `n`, computed in bigint arithmetic alone: the reference encoding. */
function zigzagVarint(n: bigint): number[] {
  let v = n >= 0n ? n << 1n : (-n << 1n) - 1n;
  const out: number[] = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return out;
}

const EDGES = [0n, 1n, -1n, 63n, -64n, 64n, 2n ** 48n, 2n ** 49n - 1n, 2n ** 49n, -(2n ** 49n), 2n ** 52n - 1n, 2n ** 52n, -(2n ** 52n), -(2n ** 52n) - 1n, 2n ** 53n + 1n, 2n ** 63n - 1n, -(2n ** 63n)];

describe("thrift compact integers", () => {
  it.each(EDGES.map((n) => [n]))("an i64 of %s is written as the reference zigzag varint and read back exactly", (n) => {
    const struct: ThriftStruct = { fields: [{ id: 1, type: T.I64, value: n }] };
    const bytes = writeStruct(struct);
    // The field header (delta 1, type i64), the varint, the stop byte.
    expect([...bytes]).toEqual([(1 << 4) | T.I64, ...zigzagVarint(n), T.STOP]);
    expect(readStruct(bytes).struct).toEqual(struct);
  });

  it("reads a binary's length and a long list's size written past one byte", () => {
    const struct: ThriftStruct = {
      fields: [
        { id: 1, type: T.BINARY, value: new Uint8Array(300).fill(7) },
        { id: 2, type: T.LIST, value: { elementType: T.I32, items: Array.from({ length: 200 }, (_, i) => BigInt(i - 100)) } },
      ],
    };
    expect(readStruct(writeStruct(struct)).struct).toEqual(struct);
  });

  it("refuses a varint longer than 64 bits", () => {
    expect(() => readStruct(Uint8Array.from([(1 << 4) | T.I64, ...Array(11).fill(0xff), 0x01, T.STOP]))).toThrow(/varint too long/);
  });
});
