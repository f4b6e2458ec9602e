/**
 * Thrift's compact protocol, read into a generic tree and written back byte for byte: enough to edit a parquet
 * footer (FileMetaData) without a generated schema. Fields keep their order and their types; integers of every
 * width are bigint, so a 64-bit file offset is never rounded. Reading then writing an untouched tree gives the same
 * bytes (test/parquet-concat.test.ts checks it on real footers).
 */
import { GrowingBytes } from "./growing-bytes.js";

/** Compact protocol type codes (bool fields carry their value in the code: 1 true, 2 false). */
export const T = {
  STOP: 0,
  TRUE: 1,
  FALSE: 2,
  BYTE: 3,
  I16: 4,
  I32: 5,
  I64: 6,
  DOUBLE: 7,
  BINARY: 8,
  LIST: 9,
  SET: 10,
  MAP: 11,
  STRUCT: 12,
} as const;

export type ThriftValue = boolean | bigint | number | Uint8Array | ThriftList | ThriftMap | ThriftStruct | EncodedStruct;
export interface ThriftList {
  elementType: number;
  items: ThriftValue[];
}
export interface ThriftMap {
  keyType: number;
  valueType: number;
  entries: [ThriftValue, ThriftValue][];
}
export interface ThriftField {
  id: number;
  /** The field's type code; TRUE for a bool field whatever its value. */
  type: number;
  value: ThriftValue;
}
export interface ThriftStruct {
  fields: ThriftField[];
}
/**
 * A struct already in compact-protocol bytes (writeStruct's output), written as it is wherever a struct goes: a
 * merged parquet footer keeps each part's row groups as bytes instead of as trees of objects.
 */
export interface EncodedStruct {
  encoded: Uint8Array;
}

/** The field `id` of a struct, or undefined. */
export function field(struct: ThriftStruct, id: number): ThriftField | undefined {
  return struct.fields.find((f) => f.id === id);
}

export function readStruct(bytes: Uint8Array, at = 0): { struct: ThriftStruct; end: number } {
  const reader = new Reader(bytes, at);
  const struct = reader.struct();
  return { struct, end: reader.at };
}

export function writeStruct(struct: ThriftStruct): Uint8Array {
  const writer = new Writer();
  writer.struct(struct);
  return writer.bytes();
}

class Reader {
  constructor(
    private readonly bytes: Uint8Array,
    public at: number,
  ) {}

  private byte(): number {
    if (this.at >= this.bytes.length) throw new Error("thrift: truncated input");
    return this.bytes[this.at++]!;
  }

  /**
   * A varint as a Number while it has at most 49 bits (7 bytes), exact there, and as a bigint past that: footers
   * are thousands of small integers, and building each byte by byte in bigint arithmetic was most of a merge's CPU.
   */
  private varintValue(): number | bigint {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 7; i++) {
      const b = this.byte();
      result += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return result;
      scale *= 128;
    }
    let big = BigInt(result);
    for (let shift = 49n; shift <= 70n; shift += 7n) {
      const b = this.byte();
      big |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return big;
    }
    throw new Error("thrift: varint too long");
  }

  /** A varint used as a length or a count. */
  private size(): number {
    return Number(this.varintValue());
  }

  private zigzag(): bigint {
    const n = this.varintValue();
    if (typeof n === "number") return BigInt(n % 2 === 0 ? n / 2 : -(n + 1) / 2);
    return (n >> 1n) ^ -(n & 1n);
  }

  struct(): ThriftStruct {
    const fields: ThriftField[] = [];
    let last = 0;
    for (;;) {
      const header = this.byte();
      const type = header & 0x0f;
      if (type === T.STOP) return { fields };
      const delta = header >> 4;
      const id = delta === 0 ? Number(this.zigzag()) : last + delta;
      last = id;
      if (type === T.TRUE || type === T.FALSE) fields.push({ id, type: T.TRUE, value: type === T.TRUE });
      else fields.push({ id, type, value: this.value(type) });
    }
  }

  private value(type: number): ThriftValue {
    switch (type) {
      case T.TRUE:
      case T.FALSE:
        // Inside a list or map a bool is a whole byte: 1 is true.
        return this.byte() === 1;
      case T.BYTE:
        return BigInt((this.byte() << 24) >> 24);
      case T.I16:
      case T.I32:
      case T.I64:
        return this.zigzag();
      case T.DOUBLE: {
        const view = new DataView(this.bytes.buffer, this.bytes.byteOffset + this.at, 8);
        this.at += 8;
        return view.getFloat64(0, true);
      }
      case T.BINARY: {
        const length = this.size();
        if (this.at + length > this.bytes.length) throw new Error("thrift: truncated binary");
        const value = this.bytes.slice(this.at, this.at + length);
        this.at += length;
        return value;
      }
      case T.LIST:
      case T.SET: {
        const header = this.byte();
        const elementType = header & 0x0f;
        const size = header >> 4 === 15 ? this.size() : header >> 4;
        const items: ThriftValue[] = [];
        for (let i = 0; i < size; i++) items.push(this.value(elementType));
        return { elementType, items };
      }
      case T.MAP: {
        const size = this.size();
        if (size === 0) return { keyType: 0, valueType: 0, entries: [] };
        const types = this.byte();
        const keyType = types >> 4;
        const valueType = types & 0x0f;
        const entries: [ThriftValue, ThriftValue][] = [];
        for (let i = 0; i < size; i++) entries.push([this.value(keyType), this.value(valueType)]);
        return { keyType, valueType, entries };
      }
      case T.STRUCT:
        return this.struct();
      default:
        throw new Error(`thrift: unknown type ${type}`);
    }
  }
}

/** 2^53, and half of it: below these a varint (a zigzag) is exact in Number arithmetic. */
const SAFE_LIMIT = 2n ** 53n;
const HALF_SAFE_LIMIT = 2n ** 52n;

class Writer {
  /** A growing buffer: a byte per element of a JS array cost 8 and more. */
  private out = new GrowingBytes(256);

  bytes(): Uint8Array {
    return new Uint8Array(this.out.view());
  }

  /** `n` ≥ 0, in Number arithmetic where it is exact (below 2^53), as the reader does. */
  private varint(n: bigint | number): void {
    if (typeof n === "number" || n < SAFE_LIMIT) {
      this.out.varint(Number(n));
      return;
    }
    let v = n;
    while (v >= 0x80n) {
      this.out.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.out.push(Number(v));
  }

  private zigzag(n: bigint): void {
    if (n > -HALF_SAFE_LIMIT && n < HALF_SAFE_LIMIT) {
      const v = Number(n);
      this.varint(v >= 0 ? v * 2 : -v * 2 - 1);
      return;
    }
    this.varint(n >= 0n ? n << 1n : (-n << 1n) - 1n);
  }

  struct(struct: ThriftStruct): void {
    let last = 0;
    for (const f of struct.fields) {
      const type = f.type === T.TRUE ? (f.value ? T.TRUE : T.FALSE) : f.type;
      const delta = f.id - last;
      if (delta > 0 && delta <= 15) this.out.push((delta << 4) | type);
      else {
        this.out.push(type);
        this.zigzag(BigInt(f.id));
      }
      last = f.id;
      if (f.type !== T.TRUE) this.value(f.type, f.value);
    }
    this.out.push(T.STOP);
  }

  private value(type: number, value: ThriftValue): void {
    switch (type) {
      case T.TRUE:
      case T.FALSE:
        this.out.push(value ? 1 : 2);
        return;
      case T.BYTE:
        this.out.push(Number(value as bigint) & 0xff);
        return;
      case T.I16:
      case T.I32:
      case T.I64:
        this.zigzag(value as bigint);
        return;
      case T.DOUBLE: {
        const bytes = new Uint8Array(8);
        new DataView(bytes.buffer).setFloat64(0, value as number, true);
        this.out.append(bytes);
        return;
      }
      case T.BINARY: {
        const bytes = value as Uint8Array;
        this.varint(bytes.length);
        this.out.append(bytes);
        return;
      }
      case T.LIST:
      case T.SET: {
        const list = value as ThriftList;
        if (list.items.length < 15) this.out.push((list.items.length << 4) | list.elementType);
        else {
          this.out.push(0xf0 | list.elementType);
          this.varint(list.items.length);
        }
        for (const item of list.items) this.value(list.elementType, item);
        return;
      }
      case T.MAP: {
        const map = value as ThriftMap;
        this.varint(map.entries.length);
        if (map.entries.length === 0) return;
        this.out.push((map.keyType << 4) | map.valueType);
        for (const [k, v] of map.entries) {
          this.value(map.keyType, k);
          this.value(map.valueType, v);
        }
        return;
      }
      case T.STRUCT:
        if ("encoded" in (value as object)) this.out.append((value as EncodedStruct).encoded);
        else this.struct(value as ThriftStruct);
        return;
      default:
        throw new Error(`thrift: unknown type ${type}`);
    }
  }
}
