/**
 * Parquet column chunks from striped leaf columns (parquet-shred.ts): one data page (v1) per column chunk, levels
 * in the RLE hybrid encoding (runs only), values PLAIN, the page compressed as a whole; and the chunk's metadata,
 * with the min/max statistics readers prune row groups by. Field numbers are parquet.thrift's
 * (apache/parquet-format); parquet-columnar.ts puts the chunks into a file.
 */
import { T, writeStruct, type ThriftField, type ThriftStruct } from "./thrift-compact.js";
import type { LeafColumn } from "./parquet-shred.js";

/** parquet.thrift's Type for each leaf kind, and its CompressionCodec numbers. */
export const PHYSICAL_TYPE = { int32: 1, int64: 2, float: 4, double: 5, utf8: 6 } as const;
export const CODEC = { none: 0, zstd: 6 } as const;
const ENCODING = { PLAIN: 0, RLE: 3 } as const;
/** Min/max statistics of byte arrays longer than this are left out: they would only bloat the footer. */
const MAX_TEXT_STATISTIC = 64;

export type Compress = (bytes: Uint8Array) => Uint8Array;

const i32 = (id: number, value: number): ThriftField => ({ id, type: T.I32, value: BigInt(value) });
export const i64 = (id: number, value: number): ThriftField => ({ id, type: T.I64, value: BigInt(value) });
const binary = (id: number, value: Uint8Array): ThriftField => ({ id, type: T.BINARY, value });
const bool = (id: number, value: boolean): ThriftField => ({ id, type: T.TRUE, value });

/** The leaf's values in PLAIN encoding. */
function plainValues(column: LeafColumn): Uint8Array {
  const { kind } = column.spec;
  if (kind === "utf8") return column.text!.view();
  if (kind === "int64") {
    const out = new BigInt64Array(column.bigValues.length);
    column.bigValues.forEach((value, i) => (out[i] = BigInt(value)));
    return new Uint8Array(out.buffer);
  }
  const numbers = column.numbers!;
  return new Uint8Array(numbers.buffer, numbers.byteOffset, column.numberCount * numbers.BYTES_PER_ELEMENT);
}

/** The page's content before compression: repetition levels, definition levels, values. */
function pageBody(column: LeafColumn): Uint8Array {
  const sections = [
    ...(column.repetition ? [column.repetition.encoded()] : []),
    ...(column.definition ? [column.definition.encoded()] : []),
    plainValues(column),
  ];
  return Buffer.concat(sections);
}

/** Min and max as parquet stores them (the physical type's little-endian bytes; UTF-8 for text). */
function minMax(column: LeafColumn): { min: Uint8Array; max: Uint8Array } | undefined {
  const { kind } = column.spec;
  if (column.valueCount === 0) return undefined;
  if (kind === "utf8") return textMinMax(column.text!.view());
  if (kind === "int64") {
    let min = column.bigValues[0]!;
    let max = min;
    for (const value of column.bigValues) {
      if (value < min) min = value;
      if (value > max) max = value;
    }
    return { min: new Uint8Array(new BigInt64Array([BigInt(min)]).buffer), max: new Uint8Array(new BigInt64Array([BigInt(max)]).buffer) };
  }
  const numbers = column.numbers!;
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < column.numberCount; i++) {
    const value = numbers[i]!;
    if (value < min) min = value; // NaN never compares true: statistics leave it out
    if (value > max) max = value;
  }
  if (min > max) return undefined; // only NaNs
  // Parquet's rule for floats: a zero minimum is written -0, a zero maximum +0.
  if (min === 0) min = -0;
  if (max === 0) max = 0;
  const Numbers = numbers.constructor as new (values: number[]) => Int32Array | Float32Array | Float64Array;
  return { min: new Uint8Array(new Numbers([min]).buffer), max: new Uint8Array(new Numbers([max]).buffer) };
}

/** The smallest and largest of PLAIN-encoded byte arrays, compared as unsigned bytes (parquet's order for UTF-8). */
function textMinMax(plain: Buffer): { min: Uint8Array; max: Uint8Array } {
  let min = [0, 0];
  let max = [0, 0];
  let first = true;
  for (let at = 0; at < plain.length; ) {
    const length = plain.readInt32LE(at);
    const start = at + 4;
    const end = start + length;
    if (first || plain.compare(plain, start, end, min[0], min[1]) < 0) min = [start, end];
    if (first || plain.compare(plain, start, end, max[0], max[1]) > 0) max = [start, end];
    first = false;
    at = end;
  }
  return { min: plain.subarray(min[0], min[1]), max: plain.subarray(max[0], max[1]) };
}

/**
 * The chunk's statistics: the null count, and min/max for leaves outside lists (a record's own fields, the ones row
 * groups are pruned by). A list's elements (token ids, log-probs, message texts) get none: no reader prunes on the
 * smallest token id, and scanning them was a tenth of a part's encode.
 */
function statistics(column: LeafColumn): ThriftStruct {
  const fields: ThriftField[] = [i64(3, column.count - column.valueCount)];
  const range = column.spec.maxRepetition === 0 ? minMax(column) : undefined;
  const max = range && range.max.length <= MAX_TEXT_STATISTIC ? range.max : undefined;
  const min = range && range.min.length <= MAX_TEXT_STATISTIC ? range.min : undefined;
  // In field order: max_value, min_value, then whether each is exact (they are, when written).
  if (max) fields.push(binary(5, max));
  if (min) fields.push(binary(6, min));
  if (max) fields.push(bool(7, true));
  if (min) fields.push(bool(8, true));
  return { fields };
}

export interface EncodedChunk {
  /** The page header and the page. */
  bytes: Uint8Array[];
  byteLength: number;
  uncompressedLength: number;
  /** ColumnMetaData, its data_page_offset still to be set (setChunkOffset). */
  meta: ThriftStruct;
}

/** One column chunk: a page header and its page, and the chunk's metadata. */
export function encodeChunk(column: LeafColumn, codec: number, compress: Compress | undefined): EncodedChunk {
  const body = pageBody(column);
  const page = compress ? compress(body) : body;
  const header = writeStruct({
    fields: [
      i32(1, 0), // DATA_PAGE
      i32(2, body.length),
      i32(3, page.length),
      { id: 5, type: T.STRUCT, value: { fields: [i32(1, column.count), i32(2, ENCODING.PLAIN), i32(3, ENCODING.RLE), i32(4, ENCODING.RLE)] } },
    ],
  });
  const byteLength = header.length + page.length;
  const uncompressedLength = header.length + body.length;
  const meta: ThriftStruct = {
    fields: [
      i32(1, PHYSICAL_TYPE[column.spec.kind]),
      { id: 2, type: T.LIST, value: { elementType: T.I32, items: [BigInt(ENCODING.PLAIN), BigInt(ENCODING.RLE)] } },
      { id: 3, type: T.LIST, value: { elementType: T.BINARY, items: column.spec.path.map((name) => Buffer.from(name)) } },
      i32(4, codec),
      i64(5, column.count),
      i64(6, uncompressedLength),
      i64(7, byteLength),
      i64(9, 0),
      { id: 12, type: T.STRUCT, value: statistics(column) },
      // encoding_stats: one data page, PLAIN
      { id: 13, type: T.LIST, value: { elementType: T.STRUCT, items: [{ fields: [i32(1, 0), i32(2, ENCODING.PLAIN), i32(3, 1)] }] } },
    ],
  };
  return { bytes: [header, page], byteLength, uncompressedLength, meta };
}

/** Sets the chunk's data_page_offset: where its page header starts in the file. */
export function setChunkOffset(chunk: EncodedChunk, offset: number): void {
  const field = chunk.meta.fields.find((f) => f.id === 9)!;
  field.value = BigInt(offset);
}
