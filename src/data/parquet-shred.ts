/**
 * Rows striped into parquet's leaf columns as they arrive (Dremel's record shredding): each leaf keeps its repetition
 * and definition levels (as runs, parquet-levels.ts) and its values in growing buffers, outside the JS heap. The
 * trajectory writer appends each finished trajectory here instead of keeping it as an object until its part is
 * written (kept objects survive scavenges and are promoted); parquet-pages.ts writes the buffers as pages.
 *
 * Levels follow the arrow schema as arrow's parquet writer maps it (parquet-columnar.ts checks them against the
 * schema parquet-wasm writes): a nullable field adds a definition level, and a list is
 * `group (LIST) { repeated group list { element } }`, which adds one definition and one repetition level.
 */
import { DataType, type Field, type Schema } from "apache-arrow";
import { GrowingBytes } from "./growing-bytes.js";
import { LevelRuns, MAX_LEVEL } from "./parquet-levels.js";

/** How a leaf stores its values: parquet's physical type, and the arrow types that map to it. */
export type LeafKind = "int32" | "int64" | "float" | "double" | "utf8";

function leafKindOf(type: DataType): LeafKind | undefined {
  if (DataType.isUtf8(type)) return "utf8";
  if (DataType.isInt(type) && type.isSigned) return type.bitWidth === 64 ? "int64" : "int32";
  if (DataType.isFloat(type)) return type.precision === 1 ? "float" : type.precision === 2 ? "double" : undefined;
  return undefined;
}

type NumberArray = Int32Array | Float32Array | Float64Array;
type NumberArrayType = new (length: number) => NumberArray;
const NUMBER_ARRAYS: Partial<Record<LeafKind, NumberArrayType>> = { int32: Int32Array, float: Float32Array, double: Float64Array };

/** One leaf column of one row group: its levels and its non-null values. */
export class LeafColumn {
  /** Level entries (values and nulls): parquet's num_values. */
  count = 0;
  readonly repetition: LevelRuns | undefined;
  readonly definition: LevelRuns | undefined;
  /** int32/float/double values. */
  numbers: NumberArray | undefined;
  numberCount = 0;
  /** int64 values, as given. */
  readonly bigValues: (number | bigint)[] = [];
  /** utf8 values, already in PLAIN encoding (a 4-byte little-endian length, then the bytes). */
  readonly text: GrowingBytes | undefined;
  textCount = 0;

  /** The lengths after the last whole row, to take a half-striped row back. */
  private committed = [0, 0, 0, 0, 0];

  constructor(readonly spec: LeafSpec) {
    this.repetition = spec.maxRepetition > 0 ? new LevelRuns() : undefined;
    this.definition = spec.maxDefinition > 0 ? new LevelRuns() : undefined;
    const Numbers = NUMBER_ARRAYS[spec.kind];
    if (Numbers) this.numbers = new Numbers(16);
    this.text = spec.kind === "utf8" ? new GrowingBytes(256) : undefined;
  }

  /** Values, not nulls. */
  get valueCount(): number {
    return this.spec.kind === "utf8" ? this.textCount : this.spec.kind === "int64" ? this.bigValues.length : this.numberCount;
  }

  commit(): void {
    const c = this.committed;
    c[0] = this.count;
    c[1] = this.numberCount;
    c[2] = this.bigValues.length;
    c[3] = this.text?.length ?? 0;
    c[4] = this.textCount;
    this.repetition?.mark();
    this.definition?.mark();
  }

  rollback(): void {
    const c = this.committed;
    this.count = c[0]!;
    this.numberCount = c[1]!;
    this.bigValues.length = c[2]!;
    if (this.text) this.text.length = c[3]!;
    this.textCount = c[4]!;
    this.repetition?.restore();
    this.definition?.restore();
  }

  levels(repetition: number, definition: number): void {
    this.repetition?.push(repetition);
    this.definition?.push(definition);
    this.count += 1;
  }

  private ensureNumbers(extra: number): NumberArray {
    const numbers = this.numbers!;
    if (this.numberCount + extra <= numbers.length) return numbers;
    const grown = new (numbers.constructor as NumberArrayType)(Math.max(this.numberCount + extra, numbers.length * 2));
    grown.set(numbers.subarray(0, this.numberCount));
    this.numbers = grown;
    return grown;
  }

  /** One value at the leaf's full definition level. */
  value(repetition: number, value: unknown): void {
    const { kind } = this.spec;
    if (kind === "utf8") {
      if (typeof value !== "string") throw this.wrongType(value, "a string");
      const text = this.text!;
      text.ensure(4 + 3 * value.length); // a UTF-16 unit is at most 3 bytes of UTF-8
      const written = value.length === 0 ? 0 : text.bytes.write(value, text.length + 4, "utf8");
      text.bytes.writeInt32LE(written, text.length);
      text.length += 4 + written;
      this.textCount += 1;
    } else if (kind === "int64") {
      if (typeof value !== "number" && typeof value !== "bigint") throw this.wrongType(value, "a number");
      this.bigValues.push(value);
    } else {
      if (typeof value !== "number") throw this.wrongType(value, "a number");
      this.ensureNumbers(1)[this.numberCount++] = value;
    }
    this.levels(repetition, this.spec.maxDefinition);
  }

  /**
   * A whole list of required numbers (a token list): values copied in bulk, the first at `repetition`, the rest at
   * the leaf's own repetition level.
   */
  numberList(repetition: number, values: ArrayLike<number>): void {
    const count = values.length;
    const numbers = this.ensureNumbers(count);
    if (ArrayBuffer.isView(values)) numbers.set(values as unknown as ArrayLike<number>, this.numberCount);
    else {
      for (let i = 0; i < count; i++) {
        const value = values[i];
        if (typeof value !== "number") throw this.wrongType(value, "a number");
        numbers[this.numberCount + i] = value;
      }
    }
    this.numberCount += count;
    this.repetition?.push(repetition);
    this.repetition?.push(this.spec.maxRepetition, count - 1);
    this.definition?.push(this.spec.maxDefinition, count);
    this.count += count;
  }

  private wrongType(value: unknown, expected: string): Error {
    const got = value === null ? "null" : Array.isArray(value) ? "a list" : typeof value;
    return new TypeError(`parquet column ${this.spec.path.join(".")}: expected ${expected}, got ${got}`);
  }
}

export interface LeafSpec {
  /** The leaf's path in the parquet schema (lists' `list` and `element` levels included). */
  path: string[];
  kind: LeafKind;
  maxDefinition: number;
  maxRepetition: number;
}

/** The arrow schema as a tree to shred rows along; leaves are numbered in the parquet schema's order. */
type Node =
  | { kind: "leaf"; name: string; path: string; nullable: boolean; leaf: number }
  | { kind: "struct"; name: string; path: string; nullable: boolean; children: Node[]; leaves: number[] }
  | { kind: "list"; name: string; path: string; nullable: boolean; element: Node; repetition: number; leaves: number[] };

export interface ShredLayout {
  leaves: LeafSpec[];
  fields: Node[];
}

/** The layout of `schema`; undefined when it holds a type this writer does not write (the caller uses parquet-wasm). */
export function shredLayout(schema: Schema): ShredLayout | undefined {
  const leaves: LeafSpec[] = [];
  const build = (field: Field, path: string[], definition: number, repetition: number): Node | undefined => {
    const own = definition + (field.nullable ? 1 : 0);
    const at = [...path, field.name];
    const { type } = field;
    if (DataType.isStruct(type)) {
      const first = leaves.length;
      const children: Node[] = [];
      for (const child of type.children) {
        const node = build(child, at, own, repetition);
        if (!node) return undefined;
        children.push(node);
      }
      return { kind: "struct", name: field.name, path: at.join("."), nullable: field.nullable, children, leaves: range(first, leaves.length) };
    }
    if (DataType.isList(type)) {
      const first = leaves.length;
      const element = build(type.children[0]!, [...at, "list"], own + 1, repetition + 1);
      if (!element) return undefined;
      return { kind: "list", name: field.name, path: at.join("."), nullable: field.nullable, element, repetition: repetition + 1, leaves: range(first, leaves.length) };
    }
    const kind = leafKindOf(type);
    if (!kind || own > MAX_LEVEL || repetition > MAX_LEVEL) return undefined;
    leaves.push({ path: at, kind, maxDefinition: own, maxRepetition: repetition });
    return { kind: "leaf", name: field.name, path: at.join("."), nullable: field.nullable, leaf: leaves.length - 1 };
  };
  const fields: Node[] = [];
  for (const field of schema.fields) {
    const node = build(field, [], 0, 0);
    if (!node) return undefined;
    fields.push(node);
  }
  return { leaves, fields };
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);
const isMissing = (value: unknown): value is null | undefined => value === null || value === undefined;
const isList = (value: unknown): value is ArrayLike<unknown> => Array.isArray(value) || (ArrayBuffer.isView(value) && !(value instanceof DataView));

/** The rows of one row group, striped into its leaf columns. */
export class RowGroupColumns {
  readonly columns: LeafColumn[];
  rows = 0;
  constructor(private readonly layout: ShredLayout) {
    this.columns = layout.leaves.map((spec) => new LeafColumn(spec));
  }

  /**
   * Appends one row (a plain object keyed by the schema's top-level names). A value of the wrong kind throws a
   * TypeError naming its column, and the row is taken back whole.
   */
  append(row: Record<string, unknown>): void {
    try {
      for (const node of this.layout.fields) this.shred(node, row[node.name], 0, 0);
    } catch (err) {
      for (const column of this.columns) column.rollback();
      throw err;
    }
    for (const column of this.columns) column.commit();
    this.rows += 1;
  }

  /** Every leaf under `leaves` gets a level entry without a value (a null, or an empty list, at `definition`). */
  private absent(leaves: readonly number[], repetition: number, definition: number): void {
    for (const leaf of leaves) this.columns[leaf]!.levels(repetition, definition);
  }

  private shred(node: Node, value: unknown, repetition: number, definition: number): void {
    if (isMissing(value)) {
      if (!node.nullable) throw new TypeError(`parquet column ${node.path}: a value is required, got ${value === null ? "null" : "nothing"}`);
      if (node.kind === "leaf") this.columns[node.leaf]!.levels(repetition, definition);
      else this.absent(node.leaves, repetition, definition);
      return;
    }
    const own = definition + (node.nullable ? 1 : 0);
    if (node.kind === "leaf") this.columns[node.leaf]!.value(repetition, value);
    else if (node.kind === "struct") {
      if (typeof value !== "object" || isList(value)) throw new TypeError(`parquet column ${node.path}: expected an object`);
      for (const child of node.children) this.shred(child, (value as Record<string, unknown>)[child.name], repetition, own);
    } else {
      if (!isList(value)) throw new TypeError(`parquet column ${node.path}: expected a list`);
      this.shredList(node, value, repetition, own);
    }
  }

  private shredList(node: Extract<Node, { kind: "list" }>, items: ArrayLike<unknown>, repetition: number, definition: number): void {
    if (items.length === 0) return this.absent(node.leaves, repetition, definition);
    const { element } = node;
    const leaf = element.kind === "leaf" ? this.columns[element.leaf]! : undefined;
    if (leaf && !element.nullable && leaf.spec.kind !== "utf8" && leaf.spec.kind !== "int64") {
      leaf.numberList(repetition, items as ArrayLike<number>);
      return;
    }
    for (let i = 0; i < items.length; i++) this.shred(element, items[i], i === 0 ? repetition : node.repetition, definition + 1);
  }
}
