/**
 * Finds and reads raw GSM8K: JSON lines (`{question, answer}` per line, the layout of shared/datasets/gsm8k) or
 * HF-style parquet (`main/train-00000-of-00001.parquet`). Every bad record is reported with its file, line or row,
 * and field; with `skipInvalid` it is counted and skipped instead.
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { InputError, UsageError } from "../errors.js";
import { extractGroundTruth, type RawGsm8k, type Split } from "./gsm8k.js";
import { describeFileError } from "./input-file.js";
import { readJsonLines } from "./jsonl.js";
import { streamParquetRows } from "./parquet.js";
import { formatIssues } from "../zod-issues.js";

export const SPLITS: readonly Split[] = ["train", "test"];

const rawRowSchema = z.object({ question: z.string(), answer: z.string() });

export interface SourceRecord {
  raw: RawGsm8k;
  groundTruth: string;
}

export interface InvalidRecord {
  /** `file:line` for JSON lines, `file: row N` for parquet (N counts from 0, as pandas does). */
  place: string;
  message: string;
}

/** Where each split's raw file is, given `--input` as a folder or a single file. */
export async function locateSplits(input: string, wanted: readonly Split[]): Promise<Map<Split, string>> {
  const stat = await fs.stat(input).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") throw new InputError(`--input ${input}: no such file or folder`);
    throw describeFileError(input, err);
  });
  const found = new Map<Split, string>();
  if (stat.isFile()) {
    const split = SPLITS.find((s) => path.basename(input).includes(s));
    if (!split) {
      throw new UsageError(`--input ${input}: cannot tell the split from the file name`, {
        hint: "name the file train.jsonl or test.jsonl (or *.parquet), or pass a folder holding both",
      });
    }
    found.set(split, input);
  } else {
    for (const split of SPLITS) {
      const candidates = [
        path.join(input, `${split}.jsonl`),
        path.join(input, `${split}.json`),
        path.join(input, "main", `${split}-00000-of-00001.parquet`),
        path.join(input, `${split}-00000-of-00001.parquet`),
        path.join(input, `${split}.parquet`),
      ];
      for (const candidate of candidates) {
        if (await fs.stat(candidate).then((s) => s.isFile(), () => false)) {
          found.set(split, candidate);
          break;
        }
      }
    }
  }
  const missing = wanted.filter((s) => !found.has(s));
  if (missing.length) {
    throw new InputError(`--input ${input}: no ${missing.join(" or ")} split found`, {
      hint: "expected train.jsonl/test.jsonl or main/train-00000-of-00001.parquet/main/test-00000-of-00001.parquet; use --split to take one split only",
    });
  }
  return found;
}

/** Validates one raw record; returns the record or the reason it is invalid. */
function checkRecord(value: unknown): SourceRecord | string {
  const parsed = rawRowSchema.safeParse(value);
  if (!parsed.success) return formatIssues(parsed.error);
  const groundTruth = extractGroundTruth(parsed.data.answer);
  if (groundTruth === undefined) return "answer: no '#### <number>' final answer";
  return { raw: parsed.data, groundTruth };
}

/**
 * Streams the valid records of one split's file, in file order, stopping after `limit` valid ones. Invalid records
 * throw an InputError naming the place, or go to `onInvalid` when skipping.
 */
export async function* readGsm8kFile(
  file: string,
  options: { limit?: number; skipInvalid?: boolean; onInvalid?: (bad: InvalidRecord) => void } = {},
): AsyncGenerator<SourceRecord> {
  let produced = 0;
  const reject = (bad: InvalidRecord): void => {
    if (!options.skipInvalid) {
      throw new InputError(`${bad.place}: ${bad.message}`, { hint: "fix the record, or pass --skip-invalid to skip such records" });
    }
    options.onInvalid?.(bad);
  };
  const isParquet = file.endsWith(".parquet");
  const records: AsyncIterable<{ place: string; value?: unknown; error?: string }> = isParquet
    ? mapAsync(streamParquetRows(file), ({ index, row }) => ({ place: `${file}: row ${index}`, value: row }))
    : mapAsync(readJsonLines(file), ({ line, value, error }) => ({ place: `${file}:${line}`, value, error }));
  for await (const record of records) {
    if (options.limit !== undefined && produced >= options.limit) return;
    if (record.error) {
      reject({ place: record.place, message: record.error });
      continue;
    }
    const checked = checkRecord(record.value);
    if (typeof checked === "string") {
      reject({ place: record.place, message: checked });
      continue;
    }
    produced += 1;
    yield checked;
  }
}

async function* mapAsync<T, U>(source: AsyncIterable<T>, fn: (item: T) => U): AsyncGenerator<U> {
  for await (const item of source) yield fn(item);
}
