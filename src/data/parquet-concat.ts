/**
 * Concatenates parquet files of one schema into one file by copying their row groups byte for byte: the pages
 * (already encoded and compressed) are copied, and one new footer lists every row group with its offsets moved to
 * where the copy put it. Nothing is decoded or encoded again, so finishing a trajectory file costs a file copy, not
 * a second parquet encode of every row (the merge used to read every part back and write it anew).
 *
 * Only what cannot differ between parts is trusted to match: the schema, the key/value metadata (arrow's schema
 * among it), the column orders and the format version are compared byte for byte, and encrypted files are
 * refused; when anything differs, concatParquetFiles returns false and the caller re-encodes.
 *
 * Field numbers are parquet.thrift's (apache/parquet-format).
 */
import { createReadStream, promises as fs } from "node:fs";
import { writeFileAtomic } from "./atomic.js";
import { field, readStruct, T, writeStruct, type EncodedStruct, type ThriftList, type ThriftStruct } from "./thrift-compact.js";

/** What opens and ends every parquet file. */
export const MAGIC = "PAR1";
/** FileMetaData's fields (the footer). */
export const FILE_META = { VERSION: 1, SCHEMA: 2, NUM_ROWS: 3, ROW_GROUPS: 4, KEY_VALUE: 5, CREATED_BY: 6, COLUMN_ORDERS: 7, ENCRYPTION: 8 };
const ROW_GROUP = { COLUMNS: 1, FILE_OFFSET: 5, ORDINAL: 7 };
/** ColumnChunk's file_offset (its only absolute offset once the page index is dropped). */
const COLUMN_CHUNK_OFFSETS = [2];
const COLUMN_CHUNK_META = 3;
/** ColumnChunk's page index fields: offset_index_offset/length, column_index_offset/length. */
const PAGE_INDEX_FIELDS = [4, 5, 6, 7];
/** ColumnMetaData's absolute offsets: data_page, index_page, dictionary_page. */
const COLUMN_META_OFFSETS = [9, 10, 11];
const COLUMN_META = { TOTAL_COMPRESSED_SIZE: 7, DATA_PAGE_OFFSET: 9, DICTIONARY_PAGE_OFFSET: 11, BLOOM_FILTER_OFFSET: 14 };

interface Part {
  file: string;
  /** Where the last column chunk's pages end: the page index and the footer after it are not copied. */
  bodyEnd: number;
  meta: ThriftStruct;
}

const columnChunks = (meta: ThriftStruct): ThriftStruct[] =>
  rowGroups(meta).flatMap((group) => ((field(group, ROW_GROUP.COLUMNS)?.value as ThriftList | undefined)?.items ?? []) as ThriftStruct[]);
const rowGroups = (meta: ThriftStruct): ThriftStruct[] =>
  ((field(meta, FILE_META.ROW_GROUPS)?.value as ThriftList | undefined)?.items ?? []) as ThriftStruct[];
const i64 = (struct: ThriftStruct | undefined, id: number): number | undefined => {
  const value = struct && field(struct, id)?.value;
  return typeof value === "bigint" ? Number(value) : undefined;
};

/**
 * Where the part's column chunks end; undefined when something the copy cannot move lies among them (a bloom
 * filter, or a page index before the last page). The page index (writers put it after the last row group) holds
 * absolute page offsets of its own, so it is left behind and its fields dropped: it only speeds up filtered reads.
 */
function pagesEnd(meta: ThriftStruct): number | undefined {
  let end = 4;
  let indexStart = Infinity;
  for (const chunk of columnChunks(meta)) {
    const columnMeta = field(chunk, COLUMN_CHUNK_META)?.value as ThriftStruct | undefined;
    const start = i64(columnMeta, COLUMN_META.DICTIONARY_PAGE_OFFSET) || i64(columnMeta, COLUMN_META.DATA_PAGE_OFFSET);
    const size = i64(columnMeta, COLUMN_META.TOTAL_COMPRESSED_SIZE);
    if (start === undefined || size === undefined || i64(columnMeta, COLUMN_META.BLOOM_FILTER_OFFSET) !== undefined) return undefined;
    end = Math.max(end, start + size);
    for (const id of [4, 6]) indexStart = Math.min(indexStart, i64(chunk, id) ?? Infinity);
  }
  return indexStart < end ? undefined : end;
}

/** The footer of a parquet file; undefined when it is not a plain (unencrypted) parquet file. */
async function readPart(file: string): Promise<Part | undefined> {
  const handle = await fs.open(file, "r");
  try {
    const size = (await handle.stat()).size;
    if (size < 12) return undefined;
    const head = Buffer.alloc(4);
    const tail = Buffer.alloc(8);
    await handle.read(head, 0, 4, 0);
    await handle.read(tail, 0, 8, size - 8);
    if (head.toString("latin1") !== MAGIC || tail.toString("latin1", 4) !== MAGIC) return undefined;
    const footerLength = tail.readUInt32LE(0);
    const bodyEnd = size - 8 - footerLength;
    if (bodyEnd < 4) return undefined;
    const footer = Buffer.alloc(footerLength);
    await handle.read(footer, 0, footerLength, bodyEnd);
    const { struct } = readStruct(footer);
    if (field(struct, FILE_META.ENCRYPTION)) return undefined;
    const pages = pagesEnd(struct);
    if (pages === undefined || pages > bodyEnd) return undefined;
    return { file, bodyEnd: pages, meta: struct };
  } finally {
    await handle.close();
  }
}

/** The encoding of the fields every part must share, to compare them. */
function sharedFields(meta: ThriftStruct): string {
  const ids = [FILE_META.VERSION, FILE_META.SCHEMA, FILE_META.KEY_VALUE, FILE_META.COLUMN_ORDERS];
  return Buffer.from(writeStruct({ fields: meta.fields.filter((f) => ids.includes(f.id)) })).toString("base64");
}

/** Adds `delta` to each of the struct's fields `ids` that holds an offset (a positive i64). */
function shift(struct: ThriftStruct, ids: readonly number[], delta: bigint): void {
  for (const f of struct.fields) {
    if (ids.includes(f.id) && f.type === T.I64 && (f.value as bigint) > 0n) f.value = (f.value as bigint) + delta;
  }
}

/** The part's row groups, their offsets moved by `delta` and their ordinals counted on from `ordinal`. */
function movedRowGroups(meta: ThriftStruct, delta: bigint, ordinal: number): ThriftStruct[] {
  const groups = rowGroups(meta);
  groups.forEach((group, i) => {
    shift(group, [ROW_GROUP.FILE_OFFSET], delta);
    const ordinalField = field(group, ROW_GROUP.ORDINAL);
    if (ordinalField) ordinalField.value = BigInt(ordinal + i);
    for (const chunk of ((field(group, ROW_GROUP.COLUMNS)?.value as ThriftList | undefined)?.items ?? []) as ThriftStruct[]) {
      shift(chunk, COLUMN_CHUNK_OFFSETS, delta);
      chunk.fields = chunk.fields.filter((f) => !PAGE_INDEX_FIELDS.includes(f.id));
      const columnMeta = field(chunk, COLUMN_CHUNK_META)?.value as ThriftStruct | undefined;
      if (columnMeta) shift(columnMeta, COLUMN_META_OFFSETS, delta);
    }
  });
  return groups;
}

/** A part ready to copy: where its pages end, its rows, and its row groups, moved and encoded (EncodedStruct). */
interface MovedPart {
  file: string;
  bodyEnd: number;
  rows: bigint;
  groups: EncodedStruct[];
}

/**
 * Writes `files`' rows, in order, to `out` (atomically), row groups copied as they are. False, and nothing
 * written, when there is no file or the files do not share one schema and metadata: the caller re-encodes then.
 *
 * Each part's footer is read, its row groups moved and encoded again as bytes, and its tree dropped before the next
 * one is read: the merged footer of a long run (hundreds of parts of ~100 column chunks each) held as one tree of
 * objects took ~2.7 KB a trajectory at close, 1 GB for a run of 400,000.
 */
export async function concatParquetFiles(files: readonly string[], out: string): Promise<boolean> {
  if (files.length === 0) return false;
  const parts: MovedPart[] = [];
  let first: ThriftStruct | undefined;
  let shared: string | undefined;
  let position = MAGIC.length;
  let ordinal = 0;
  for (const file of files) {
    const part = await readPart(file);
    if (!part) return false;
    first ??= part.meta;
    shared ??= sharedFields(part.meta);
    if (sharedFields(part.meta) !== shared) return false;
    const groups = movedRowGroups(part.meta, BigInt(position - MAGIC.length), ordinal);
    ordinal += groups.length;
    parts.push({ file, bodyEnd: part.bodyEnd, rows: field(part.meta, FILE_META.NUM_ROWS)!.value as bigint, groups: groups.map((group) => ({ encoded: writeStruct(group) })) });
    position += part.bodyEnd - MAGIC.length;
  }
  const rows = parts.reduce((sum, part) => sum + part.rows, 0n);
  const groups = parts.flatMap((part) => part.groups);
  const meta: ThriftStruct = {
    fields: first!.fields.map((f) => {
      if (f.id === FILE_META.NUM_ROWS) return { ...f, value: rows };
      if (f.id === FILE_META.ROW_GROUPS) return { ...f, value: { elementType: T.STRUCT, items: groups } };
      return f;
    }),
  };
  const footer = writeStruct(meta);
  const length = Buffer.alloc(4);
  length.writeUInt32LE(footer.length);
  await writeFileAtomic(
    out,
    (async function* () {
      yield Buffer.from(MAGIC, "latin1");
      // Streamed: a resumed run's first part is the whole earlier file.
      for (const part of parts) {
        // A part without rows has no pages to copy (a read stream cannot be empty).
        if (part.bodyEnd > MAGIC.length) yield* createReadStream(part.file, { start: MAGIC.length, end: part.bodyEnd - 1 });
      }
      yield footer;
      yield length;
      yield Buffer.from(MAGIC, "latin1");
    })(),
  );
  return true;
}
