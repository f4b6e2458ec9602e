/**
 * `agentrl preprocess gsm8k` as a function: raw GSM8K in, verl parquet out. Returns what it did, so the command
 * prints it and tests assert on it.
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import { refuseExisting } from "./atomic.js";
import { gsm8kArrowSchema, makeGsm8kRow, type Gsm8kVariant, type Split } from "./gsm8k.js";
import { locateSplits, readGsm8kFile, type InvalidRecord } from "./gsm8k-source.js";
import { huggingfaceMetadata } from "./hf-features.js";
import { writeParquetRows } from "./parquet.js";

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
  await fs.mkdir(options.out, { recursive: true });

  const schema = gsm8kArrowSchema(options.variant);
  const metadata = { huggingface: huggingfaceMetadata(schema) };
  const results: SplitResult[] = [];
  for (const split of options.splits) {
    const started = performance.now();
    const source = sources.get(split)!;
    const output = path.join(options.out, `${split}.parquet`);
    const rows: Record<string, unknown>[] = [];
    const skippedRecords: InvalidRecord[] = [];
    let skipped = 0;
    const records = readGsm8kFile(source, {
      ...(options.limit === undefined ? {} : { limit: options.limit }),
      skipInvalid: options.skipInvalid ?? false,
      onInvalid: (bad) => {
        skipped += 1;
        if (skippedRecords.length < 5) skippedRecords.push(bad);
      },
    });
    for await (const record of records) {
      rows.push(makeGsm8kRow(record.raw, record.groundTruth, split, rows.length, options.variant));
      if (rows.length % 1000 === 0) options.onProgress?.({ split, rows: rows.length });
    }
    const bytes = await writeParquetRows(output, rows, schema, { compression: "snappy", metadata });
    results.push({
      split,
      source,
      output,
      rows: rows.length,
      skipped,
      firstSkipped: skippedRecords,
      bytes,
      ms: performance.now() - started,
    });
  }
  return results;
}
