/**
 * Parquet files written by agentrl itself, for the files written many times a run (trajectory parts): rows are
 * striped into column buffers as they arrive (parquet-shred.ts), and taking the file writes each buffer as one page
 * (parquet-pages.ts). No arrow table, IPC stream or wasm copy of the rows is made on the way (parquet.ts's path): the
 * trajectory writer alone, journal included, takes about half the CPU it did through parquet-wasm
 * (bench/trajectory-io.mjs; docs/benchmarks.md has what that is inside a rollout).
 *
 * What the file says about itself is parquet-wasm's: its footer's schema, key/value metadata (arrow's schema among
 * it, so pyarrow and pandas read the same types) and column orders are taken from the file parquet-wasm writes for
 * no rows with the same options, and checked against the layout. Files from either writer therefore share a schema
 * byte for byte, and parquet-concat.ts joins them without re-encoding. Compression is zstd, as parquet-wasm's.
 */
import { compressUsingDict, createCCtx, init as initZstd } from "@bokuweb/zstd-wasm";
import type { Schema } from "apache-arrow";
import { packageVersion } from "../repo-paths.js";
import { readStruct, T, writeStruct, field, type ThriftList, type ThriftStruct, type ThriftField } from "./thrift-compact.js";
import { rowsToTable, tableToParquet, type WriteOptions } from "./parquet.js";
import { FILE_META, MAGIC } from "./parquet-concat.js";
import { CODEC, PHYSICAL_TYPE, encodeChunk, i64, setChunkOffset, type Compress, type EncodedChunk } from "./parquet-pages.js";
import { RowGroupColumns, shredLayout, type ShredLayout } from "./parquet-shred.js";

export type ColumnarCompression = "zstd" | "none";

export interface ColumnarOptions {
  compression: ColumnarCompression;
  /** Rows per row group. */
  rowGroupSize: number;
  /** Key/value metadata stored on the file's arrow schema, as parquet.ts's WriteOptions. */
  metadata?: Record<string, string>;
}

/** zstd at parquet-rs's default level, so parts are as large as parquet-wasm's. */
const ZSTD_LEVEL = 1;
const NO_DICTIONARY = new Uint8Array(0);
let zstdReady: Promise<Compress> | undefined;
/**
 * zstd through one compression context for the process: the library's plain compress() makes and frees a context
 * per call, which cost ~50 µs for each of a part's ~100 pages of a few KB (~7 µs with the context kept). The frames
 * are the same bytes either way.
 */
function loadZstd(): Promise<Compress> {
  zstdReady ??= initZstd().then(() => {
    const context = createCCtx();
    return (bytes: Uint8Array) => compressUsingDict(context, bytes, NO_DICTIONARY, ZSTD_LEVEL);
  });
  return zstdReady;
}

const MAGIC_BYTES = Buffer.from(MAGIC, "latin1");

/** The footer fields every file of a schema shares, from parquet-wasm's file of no rows. */
interface Template {
  fields: ThriftField[];
}

function templateFor(schema: Schema, layout: ShredLayout, options: ColumnarOptions): Template {
  const writeOptions: WriteOptions = { compression: options.compression, dictionary: false, chunkStatisticsOnly: true };
  const bytes = tableToParquet(rowsToTable([], schema, options.metadata), writeOptions);
  const footerLength = new DataView(bytes.buffer, bytes.byteOffset).getUint32(bytes.length - 8, true);
  const { struct } = readStruct(bytes.subarray(bytes.length - 8 - footerLength, bytes.length - 8));
  checkLeaves(struct, layout);
  const shared = [FILE_META.VERSION, FILE_META.SCHEMA, FILE_META.KEY_VALUE, FILE_META.COLUMN_ORDERS];
  return { fields: struct.fields.filter((f) => shared.includes(f.id)) };
}

/**
 * The layout and footer template of `schema` under `options`, made once: making them writes a whole file of no rows
 * through apache-arrow and parquet-wasm, 18–30 ms of CPU, and `agentrl train` opens a trajectory file every step.
 * Neither is written to afterwards (the footer copies the template's fields into a list of its own).
 */
function prepared(schema: Schema, options: ColumnarOptions): { layout: ShredLayout; template: Template } {
  let bySchema = preparedFor.get(schema);
  if (bySchema === undefined) {
    const layout = shredLayout(schema);
    if (!layout) throw new Error("parquet: the columnar writer does not write every type of this schema");
    bySchema = { layout, templates: new Map() };
    preparedFor.set(schema, bySchema);
  }
  const key = JSON.stringify([options.compression, options.metadata ?? null]);
  let template = bySchema.templates.get(key);
  if (template === undefined) {
    template = templateFor(schema, bySchema.layout, options);
    bySchema.templates.set(key, template);
  }
  return { layout: bySchema.layout, template };
}

const preparedFor = new WeakMap<Schema, { layout: ShredLayout; templates: Map<string, Template> }>();

/** Walks parquet's flattened schema (depth first, num_children per group) and compares each leaf with the layout's. */
function checkLeaves(meta: ThriftStruct, layout: ShredLayout): void {
  const elements = (field(meta, FILE_META.SCHEMA)!.value as ThriftList).items as ThriftStruct[];
  const number = (element: ThriftStruct, id: number) => {
    const value = field(element, id)?.value;
    return value === undefined ? undefined : Number(value as bigint);
  };
  const found: string[] = [];
  let next = 1; // element 0 is the root
  const walk = (path: string[], definition: number, repetition: number): void => {
    const element = elements[next++]!;
    const name = Buffer.from(field(element, 4)!.value as Uint8Array).toString("utf8");
    const kind = number(element, 3); // 0 required, 1 optional, 2 repeated
    const d = definition + (kind === 0 ? 0 : 1);
    const r = repetition + (kind === 2 ? 1 : 0);
    const children = number(element, 5);
    if (children === undefined) found.push(`${[...path, name].join(".")} type ${number(element, 1)} d${d} r${r}`);
    for (let i = 0; i < (children ?? 0); i++) walk([...path, name], d, r);
  };
  for (let i = 0; i < (number(elements[0]!, 5) ?? 0); i++) walk([], 0, 0);
  const expected = layout.leaves.map((leaf) => `${leaf.path.join(".")} type ${PHYSICAL_TYPE[leaf.kind]} d${leaf.maxDefinition} r${leaf.maxRepetition}`);
  if (found.join("\n") !== expected.join("\n")) {
    throw new Error(`parquet: the striped layout differs from parquet-wasm's schema:\n  ${found.join("\n  ")}\nagainst\n  ${expected.join("\n  ")}`);
  }
}

/** Rows appended one by one, and taken as a whole parquet file. */
export class ColumnarParquet {
  private groups: RowGroupColumns[] = [];
  private constructor(
    private readonly layout: ShredLayout,
    private readonly template: Template,
    private readonly options: ColumnarOptions,
    private readonly compress: Compress | undefined,
  ) {}

  /** A writer for `schema`; throws when it holds a type this writer does not write (callers use parquet.ts's then). */
  static async open(schema: Schema, options: ColumnarOptions): Promise<ColumnarParquet> {
    const { layout, template } = prepared(schema, options);
    const compress = options.compression === "zstd" ? await loadZstd() : undefined;
    return new ColumnarParquet(layout, template, options, compress);
  }

  /** Rows appended and not yet taken. */
  get rows(): number {
    return this.groups.reduce((sum, group) => sum + group.rows, 0);
  }

  append(row: Record<string, unknown>): void {
    let group = this.groups.at(-1);
    if (!group || group.rows >= this.options.rowGroupSize) {
      group = new RowGroupColumns(this.layout);
      this.groups.push(group);
    }
    group.append(row);
  }

  /** The parquet file of every row appended since the last take, in row groups of rowGroupSize; starts empty again. */
  take(): Uint8Array {
    // A group opened for a row that then failed to stripe holds no row.
    const groups = this.groups.filter((group) => group.rows > 0);
    this.groups = [];
    const codec = this.compress ? CODEC.zstd : CODEC.none;
    const out: Uint8Array[] = [MAGIC_BYTES];
    let position = MAGIC_BYTES.length;
    const rowGroups: ThriftStruct[] = [];
    let rows = 0;
    for (const [ordinal, group] of groups.entries()) {
      const chunks: EncodedChunk[] = group.columns.map((column) => encodeChunk(column, codec, this.compress));
      const start = position;
      for (const chunk of chunks) {
        setChunkOffset(chunk, position);
        out.push(...chunk.bytes);
        position += chunk.byteLength;
      }
      rowGroups.push(rowGroupMeta(chunks, group.rows, start, ordinal));
      rows += group.rows;
    }
    const footer = writeStruct({ fields: this.footerFields(rows, rowGroups) });
    const length = Buffer.alloc(4);
    length.writeUInt32LE(footer.length);
    out.push(footer, length, MAGIC_BYTES);
    return Buffer.concat(out);
  }

  private footerFields(rows: number, rowGroups: ThriftStruct[]): ThriftField[] {
    const fields: ThriftField[] = [
      ...this.template.fields,
      i64(FILE_META.NUM_ROWS, rows),
      { id: FILE_META.ROW_GROUPS, type: T.LIST, value: { elementType: T.STRUCT, items: rowGroups } },
      { id: FILE_META.CREATED_BY, type: T.BINARY, value: Buffer.from(`agentrl version ${packageVersion()}`) },
    ];
    return fields.sort((a, b) => a.id - b.id);
  }
}

function rowGroupMeta(chunks: readonly EncodedChunk[], rows: number, start: number, ordinal: number): ThriftStruct {
  const compressed = chunks.reduce((sum, chunk) => sum + chunk.byteLength, 0);
  const uncompressed = chunks.reduce((sum, chunk) => sum + chunk.uncompressedLength, 0);
  const columns = chunks.map((chunk) => ({ fields: [i64(2, 0), { id: 3, type: T.STRUCT, value: chunk.meta }] }));
  return {
    fields: [
      { id: 1, type: T.LIST, value: { elementType: T.STRUCT, items: columns } },
      i64(2, uncompressed),
      i64(3, rows),
      i64(5, start),
      i64(6, compressed),
      { id: 7, type: T.I16, value: BigInt(ordinal) },
    ],
  };
}
