/**
 * `agentrl preprocess gsm8k` as a function: raw GSM8K in, verl parquet out. Returns what it did, so the command
 * prints it and tests assert on it.
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import { InputError } from "../errors.js";
import { refuseExisting } from "./atomic.js";
import { checkOutputPath } from "./output-path.js";
import { gsm8kArrowSchema, makeGsm8kRow, type Gsm8kVariant, type Split } from "./gsm8k.js";
import { locateSplits, readGsm8kFile, type InvalidRecord } from "./gsm8k-source.js";
import { huggingfaceMetadata } from "./hf-features.js";
import { rowChunksToBatches, writeParquetStream } from "./parquet.js";

/** Rows per parquet row group and per write: GSM8K's splits fit in one, as HF `datasets` writes them. */
const ROWS_PER_GROUP = 10_000;

export interface PreprocessGsm8kOptions {
  /** Folder or file with raw GSM8K; `download` is used when absent. */
  input?: string;
  out: string;
  variant: Gsm8kVariant;
  splits: readonly Split[];
  limit?: number;
  force?: boolean;
  skipInvalid?: boolean;
  /** Fetches the raw files when no input is given; returns the folder they are in. */
  download?: (splits: readonly Split[]) => Promise<string>;
  onProgress?: (event: { split: Split; rows: number }) => void;
}

export interface SplitResult {
  split: Split;
  source: string;
  output: string;
  rows: number;
  skipped: number;
  firstSkipped: InvalidRecord[];
  bytes: number;
  ms: number;
}

export async function preprocessGsm8k(options: PreprocessGsm8kOptions): Promise<SplitResult[]> {
  const outputs = options.splits.map((split) => path.join(options.out, `${split}.parquet`));
  if (!options.force) await refuseExisting(outputs);
  let input = options.input;
  if (input === undefined) {
    if (!options.download) throw new Error("preprocessGsm8k: neither input nor download given");
    input = await options.download(options.splits);
  }
  const sources = await locateSplits(input, options.splits);
  // Every split is checked before the first is written, so an empty one leaves no half-done output folder behind.
  for (const split of options.splits) await requireRecords(sources.get(split)!, options.skipInvalid ?? false);
  await checkOutputPath(options.out, "folder");
  const createdFolder = await fs.mkdir(options.out, { recursive: true });
  const written: string[] = [];
  try {
    return await writeSplits(options, sources, written);
  } catch (err) {
    // A bad record past the first fails the run after writing began: what this run created goes, so nothing is left
    // half-done. Without --force every output was new; with it, replaced outputs stay (the old ones are gone).
    if (createdFolder !== undefined) await fs.rm(createdFolder, { recursive: true, force: true });
    else if (!options.force) for (const file of written) await fs.rm(file, { force: true });
    throw err;
  }
}

/** Writes each split's parquet file in turn, adding each finished file to `written`. */
async function writeSplits(options: PreprocessGsm8kOptions, sources: Map<Split, string>, written: string[]): Promise<SplitResult[]> {
  const schema = gsm8kArrowSchema(options.variant);
  const metadata = { huggingface: huggingfaceMetadata(schema) };
  const results: SplitResult[] = [];
  for (const split of options.splits) {
    const started = performance.now();
    const source = sources.get(split)!;
    const output = path.join(options.out, `${split}.parquet`);
    const skippedRecords: InvalidRecord[] = [];
    let skipped = 0;
    let rowCount = 0;
    const records = readGsm8kFile(source, {
      ...(options.limit === undefined ? {} : { limit: options.limit }),
      skipInvalid: options.skipInvalid ?? false,
      onInvalid: (bad) => {
        skipped += 1;
        if (skippedRecords.length < 5) skippedRecords.push(bad);
      },
    });
    // Rows go to the file a chunk at a time, so memory stays flat however large the input (bench/preprocess.mjs).
    async function* chunks(): AsyncGenerator<Record<string, unknown>[]> {
      let chunk: Record<string, unknown>[] = [];
      for await (const record of records) {
        chunk.push(makeGsm8kRow(record.raw, record.groundTruth, split, rowCount, options.variant));
        rowCount += 1;
        if (rowCount % 1000 === 0) options.onProgress?.({ split, rows: rowCount });
        if (chunk.length === ROWS_PER_GROUP) {
          yield chunk;
          chunk = [];
        }
      }
      if (chunk.length > 0) yield chunk;
    }
    const bytes = await writeParquetStream(output, rowChunksToBatches(chunks(), schema, metadata), schema, {
      compression: "snappy",
      rowGroupSize: ROWS_PER_GROUP,
      metadata,
    });
    written.push(output);
    results.push({
      split,
      source,
      output,
      rows: rowCount,
      skipped,
      firstSkipped: skippedRecords,
      bytes,
      ms: performance.now() - started,
    });
  }
  return results;
}

/**
 * Throws an InputError naming `source` when it holds no valid record: an empty dataset is an error, not an empty
 * parquet file and exit 0. Reads up to the first valid record only (all of the file when every record is skipped).
 */
async function requireRecords(source: string, skipInvalid: boolean): Promise<void> {
  let skipped = 0;
  for await (const _record of readGsm8kFile(source, { limit: 1, skipInvalid, onInvalid: () => (skipped += 1) })) return;
  throw new InputError(
    skipped ? `${source}: no valid rows (all ${skipped} skipped as invalid)` : `${source}: no rows`,
    { hint: "check --input: GSM8K has one {question, answer} record per line (JSON lines) or per parquet row" },
  );
}
