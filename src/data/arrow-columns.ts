/**
 * Arrow columns built straight into their buffers, for the types trajectory files are made of: strings, 8/16/32-bit
 * integers and floats, and lists and structs of those, nested to any depth (a message's tool calls' function).
 * apache-arrow's builders append value by value through several layers, and on trajectories they were most of a
 * parquet part's cost
 * (bench/trajectory-io.mjs). Each function returns undefined when a value does not fit the fast path (a number in a
 * string column, a map), and the caller then uses arrow's builder: the result is the same either way
 * (test/parquet-fast-columns.test.ts compares the two).
 */
import { DataType, makeData, type Data, type Field, type Struct } from "apache-arrow";

type NumberArray = Int8Array | Int16Array | Int32Array | Float32Array | Float64Array;

/** Typed arrays for the fixed-width number types built without bigint conversion. */
function numberArrayOf(type: DataType): (new (length: number) => NumberArray) | undefined {
  if (DataType.isInt(type)) {
    if (!type.isSigned) return undefined;
    return ({ 8: Int8Array, 16: Int16Array, 32: Int32Array } as Record<number, new (length: number) => NumberArray>)[type.bitWidth];
  }
  if (DataType.isFloat(type)) return ({ 1: Float32Array, 2: Float64Array } as Record<number, new (length: number) => NumberArray>)[type.precision];
  return undefined;
}

const isMissing = (value: unknown): value is null | undefined => value === null || value === undefined;

/** Arrow's validity bitmap (bit i set: value i present), and how many are missing; no bitmap when none is. */
function validity(values: readonly unknown[]): { nullBitmap: Uint8Array | undefined; nullCount: number } {
  let nullCount = 0;
  for (let i = 0; i < values.length; i++) if (isMissing(values[i])) nullCount += 1;
  if (nullCount === 0) return { nullBitmap: undefined, nullCount };
  const nullBitmap = new Uint8Array((values.length + 7) >> 3);
  for (let i = 0; i < values.length; i++) if (!isMissing(values[i])) nullBitmap[i >> 3]! |= 1 << (i & 7);
  return { nullBitmap, nullCount };
}

/** A column of strings or numbers of `type`; undefined for other types or when a value is of another kind. */
export function flatColumn(type: DataType, values: readonly unknown[]): Data | undefined {
  if (DataType.isUtf8(type)) return utf8Column(type, values);
  const ArrayType = numberArrayOf(type);
  if (!ArrayType) return undefined;
  const data = new ArrayType(values.length);
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (typeof value === "number") data[i] = value;
    else if (!isMissing(value)) return undefined;
  }
  return makeData({ type: type as never, length: values.length, ...validity(values), data } as never);
}

function utf8Column(type: DataType, values: readonly unknown[]): Data | undefined {
  let chars = 0;
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (typeof value === "string") chars += value.length;
    else if (!isMissing(value)) return undefined;
  }
  // A UTF-16 code unit is at most 3 bytes of UTF-8 (a surrogate pair, 2 units, is 4).
  const bytes = Buffer.allocUnsafe(chars * 3);
  const valueOffsets = new Int32Array(values.length + 1);
  let at = 0;
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (typeof value === "string" && value.length > 0) at += bytes.write(value, at, "utf8");
    valueOffsets[i + 1] = at;
  }
  return makeData({ type: type as never, length: values.length, ...validity(values), valueOffsets, data: bytes.subarray(0, at) } as never);
}

/** The list offsets of `lists` (a missing list is empty, and null in the bitmap), and all their items in order. */
function flattenLists(lists: readonly unknown[]): { valueOffsets: Int32Array; items: unknown[] } | undefined {
  const valueOffsets = new Int32Array(lists.length + 1);
  const items: unknown[] = [];
  for (let i = 0; i < lists.length; i++) {
    const list = lists[i];
    if (Array.isArray(list)) for (let k = 0; k < list.length; k++) items.push(list[k]);
    else if (!isMissing(list)) return undefined;
    valueOffsets[i + 1] = items.length;
  }
  return { valueOffsets, items };
}

/**
 * A list column whose items are numbers, or any column type this file builds (trajectory segments, tool calls,
 * version spans, chat messages with their tool calls); undefined for other item types or values that do not fit.
 */
export function listColumn(type: DataType, lists: readonly unknown[]): Data | undefined {
  if (!DataType.isList(type)) return undefined;
  const itemField = type.children[0]!;
  const ArrayType = numberArrayOf(itemField.type);
  if (ArrayType) return numberListColumn(type, itemField.type, ArrayType, lists);
  const flat = flattenLists(lists);
  const child = flat && fastColumn(itemField, flat.items);
  if (!flat || !child) return undefined;
  return makeData({ type, length: lists.length, ...validity(lists), valueOffsets: flat.valueOffsets, child } as never);
}

/**
 * A column of `field`'s type: strings, numbers, lists and structs of those at any depth; undefined when a type or a
 * value does not fit. A missing struct is refused where the field is not nullable (a list's items).
 */
export function fastColumn(field: Field, values: readonly unknown[]): Data | undefined {
  const { type } = field;
  if (DataType.isList(type)) return listColumn(type, values);
  if (DataType.isStruct(type)) return structColumn(type, values, field.nullable);
  return flatColumn(type, values);
}

/**
 * Lists of numbers (token ids, masks, log-probs: most of a trajectory's bytes), copied straight into one array. A list
 * may be a typed array of the column's own type (the trajectory writer's pending rows), copied whole.
 */
function numberListColumn(
  type: DataType,
  itemType: DataType,
  ArrayType: new (length: number) => NumberArray,
  lists: readonly unknown[],
): Data | undefined {
  let total = 0;
  for (let i = 0; i < lists.length; i++) {
    const list = lists[i];
    if (Array.isArray(list) || list instanceof ArrayType) total += (list as ArrayLike<number>).length;
    else if (!isMissing(list)) return undefined;
  }
  const values = new ArrayType(total);
  const valueOffsets = new Int32Array(lists.length + 1);
  let at = 0;
  for (let i = 0; i < lists.length; i++) {
    const list = lists[i];
    if (list instanceof ArrayType) {
      values.set(list, at);
      at += list.length;
    } else if (Array.isArray(list)) {
      for (let k = 0; k < list.length; k++) {
        const value = list[k];
        if (typeof value !== "number") return undefined;
        values[at++] = value;
      }
    }
    valueOffsets[i + 1] = at;
  }
  const child = makeData({ type: itemType as never, length: total, nullCount: 0, data: values } as never);
  return makeData({ type, length: lists.length, ...validity(lists), valueOffsets, child } as never);
}

/** Structs whose fields are any column type this file builds; missing ones only where `nullable`. */
function structColumn(type: Struct, items: readonly unknown[], nullable: boolean): Data | undefined {
  for (const item of items) {
    if (isMissing(item) ? !nullable : typeof item !== "object") return undefined;
  }
  const children: Data[] = [];
  for (const field of type.children) {
    const column = fastColumn(
      field,
      items.map((item) => (item as Record<string, unknown> | null | undefined)?.[field.name]),
    );
    if (!column) return undefined;
    children.push(column);
  }
  return makeData({ type, length: items.length, ...validity(items), children } as never);
}
