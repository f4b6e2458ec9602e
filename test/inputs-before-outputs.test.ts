/**
 * Inputs are checked before outputs exist (issue 15, items 3 and 4), run as a user runs the CLI:
 * - `agentrl rollout` with a missing, wrong-schema, folder or empty --data exits 2 naming the file, with no stack
 *   trace and no output file left, so the corrected command then succeeds with the same --out;
 * - every parquet and JSON-lines reader turns a folder or a missing path into an InputError naming it (parquet-wasm
 *   panicked with "RuntimeError: unreachable" on a folder);
 * - an empty dataset is an error in `preprocess gsm8k` and `train`, found before any output or process exists.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Field, Schema, Utf8 } from "apache-arrow";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "./helpers/cli.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { DEMO_CONFIG } from "./helpers/train.js";
import { preprocessGsm8kTrain } from "./helpers/rollout-run.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { InputError } from "../src/errors.js";
import { gsm8kArrowSchema, makeGsm8kRow } from "../src/data/gsm8k.js";
import { readJsonLines } from "../src/data/jsonl.js";
import { readParquetInfo, readParquetTable, streamParquetRows, writeParquetRows } from "../src/data/parquet.js";
import { tempDir } from "./helpers/tmp.js";

const scratch = tempDir("inputs-first");

/** A stack trace line, as Node prints them: a CLI error must never show one. */
const STACK_LINE = /^\s+at .+[(:]\d+/m;

const wrongSchema = path.join(scratch, "wrong-schema.parquet");
const emptyDataset = path.join(scratch, "empty.parquet");
const folder = path.join(scratch, "a-folder");
const missing = path.join(scratch, "missing.parquet");

beforeAll(async () => {
  // Raw GSM8K columns where verl's are expected: a file people do pass by mistake.
  const raw = new Schema([new Field("question", new Utf8(), true), new Field("answer", new Utf8(), true)]);
  await writeParquetRows(wrongSchema, [{ question: "2 + 2?", answer: "#### 4" }], raw);
  await writeParquetRows(emptyDataset, [], gsm8kArrowSchema("tool"));
  mkdirSync(folder);
});

describe("rollout reads and validates --data before it creates the output", () => {
  let fake: FakeSglang;
  let data: string;
  beforeAll(async () => {
    fake = await startFakeSglang();
    const made = await preprocessGsm8kTrain(path.join(scratch, "gsm8k"), 2);
    expect(made.code, made.stderr).toBe(0);
    data = path.join(scratch, "gsm8k", "train.parquet");
  });
  afterAll(async () => fake?.close());

  const rollout = (dataPath: string, out: string) =>
    runCli(["rollout", "--data", dataPath, "--model", QWEN3_DIR, "--server", fake.url, "--out", out, "--json"]);

  const cases: Array<{ name: string; data: () => string; message: RegExp }> = [
    { name: "a missing file", data: () => missing, message: /no such file/ },
    { name: "a wrong-schema file", data: () => wrongSchema, message: /row 0: data_source/ },
    { name: "a folder", data: () => folder, message: /is a folder, expected a \.parquet file/ },
    { name: "a file without rows", data: () => emptyDataset, message: /has no rows/ },
  ];
  for (const bad of cases) {
    it(`${bad.name}: exit 2 naming it, nothing written, and the corrected command then succeeds`, async () => {
      const outDir = path.join(scratch, `out-${bad.name.replaceAll(" ", "-")}`);
      const out = path.join(outDir, "trajectories.parquet");
      const failed = await rollout(bad.data(), out);
      expect(failed.code, failed.stderr).toBe(2);
      expect(failed.stderr).toContain(`error: ${bad.data()}: `);
      expect(failed.stderr).toMatch(bad.message);
      expect(failed.stderr).not.toMatch(STACK_LINE);
      expect(existsSync(outDir) ? readdirSync(outDir) : []).toEqual([]);

      const corrected = await rollout(data, out);
      expect(corrected.code, corrected.stderr).toBe(0);
      expect(JSON.parse(corrected.stdout).summary.count).toBe(2);
      expect(readdirSync(outDir)).toEqual(["trajectories.parquet"]);
    });
  }

  it("with filter_overlong_prompts off, a too-long prompt in a later row is found before any output exists", async () => {
    const longRows = path.join(scratch, "long-last.parquet");
    const question = (i: number) => (i === 3 ? "count the words ".repeat(400) : `${i} + 2?`);
    await writeParquetRows(longRows, [0, 1, 2, 3].map((i) => makeGsm8kRow({ question: question(i), answer: "#### 4" }, "4", "train", i, "tool")), gsm8kArrowSchema("tool"));
    const outDir = path.join(scratch, "out-long-last");
    const out = path.join(outDir, "trajectories.jsonl");
    const flags = ["--concurrency", "1", "--set", "data.max_prompt_length=512"];
    // One trajectory at a time: the short rows would be done and written before the long one came up.
    const failed = await runCli(["rollout", "--data", longRows, "--model", QWEN3_DIR, "--server", fake.url, "--out", out, ...flags, "--set", "data.filter_overlong_prompts=false"]);
    expect(failed.code, failed.stderr).toBe(2);
    expect(failed.stderr).toMatch(new RegExp(`error: ${longRows}: row 3: the rendered prompt has \\d+ tokens, over data\\.max_prompt_length=512`));
    expect(existsSync(outDir) ? readdirSync(outDir) : []).toEqual([]);

    const filtered = await runCli(["rollout", "--data", longRows, "--model", QWEN3_DIR, "--server", fake.url, "--out", out, ...flags, "--json"]);
    expect(filtered.code, filtered.stderr).toBe(0);
    expect(JSON.parse(filtered.stdout).summary.count).toBe(3);
  });

  it("an existing output is refused before any request, and left as it was", async () => {
    const out = path.join(scratch, "kept.jsonl");
    writeFileSync(out, '{"kept": true}\n');
    const samplesBefore = fake.stats.samples;
    const refused = await rollout(data, out);
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toContain(`output already exists: ${out}`);
    expect(fake.stats.samples).toBe(samplesBefore);
    expect(readFileSync(out, "utf8")).toBe('{"kept": true}\n');
  });
});

describe("every data reader names a folder or a missing path", () => {
  const readers: Array<[string, (file: string) => Promise<unknown>]> = [
    ["readParquetInfo", (file) => readParquetInfo(file)],
    ["readParquetTable", (file) => readParquetTable(file)],
    ["streamParquetRows", (file) => streamParquetRows(file).next()],
    ["readJsonLines", (file) => readJsonLines(file).next()],
  ];
  for (const [name, read] of readers) {
    it(`${name}: a folder and a missing path are InputErrors naming them`, async () => {
      const onFolder = read(folder);
      await expect(onFolder).rejects.toBeInstanceOf(InputError);
      await expect(onFolder).rejects.toThrow(`${folder}: is a folder, expected a .`);
      const onMissing = read(missing);
      await expect(onMissing).rejects.toBeInstanceOf(InputError);
      await expect(onMissing).rejects.toThrow(`${missing}: no such file`);
    });
  }
});

describe("an empty dataset is an error", () => {
  it("preprocess gsm8k: an empty input exits 2 naming it, and writes nothing", async () => {
    const input = path.join(scratch, "empty-raw", "train.jsonl");
    mkdirSync(path.dirname(input));
    writeFileSync(input, "\n");
    const out = path.join(scratch, "empty-preprocessed");
    const result = await runCli(["preprocess", "gsm8k", "-i", input, "-o", out, "--split", "train"]);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(`error: ${input}: no rows`);
    expect(existsSync(out)).toBe(false);
  });

  it("preprocess gsm8k: an input whose every record is skipped as invalid exits 2 too", async () => {
    const input = path.join(scratch, "invalid-raw", "train.jsonl");
    mkdirSync(path.dirname(input));
    writeFileSync(input, '{"question": "no answer field"}\n');
    const out = path.join(scratch, "invalid-preprocessed");
    const result = await runCli(["preprocess", "gsm8k", "-i", input, "-o", out, "--split", "train", "--skip-invalid"]);
    expect(result.code, result.stderr).toBe(2);
    expect(result.stderr).toContain(`error: ${input}: no valid rows (all 1 skipped as invalid)`);
    expect(existsSync(out)).toBe(false);
  });

  for (const [name, file, message] of [
    ["an empty", emptyDataset, "has no rows"],
    ["a folder as", folder, "is a folder"],
  ] as const) {
    it(`train: ${name} data.train_files exits 2 naming it, before the run folder, the engine or the worker`, async () => {
      const runDir = path.join(scratch, `train-run-${name.replaceAll(" ", "-")}`);
      const result = await runCli([
        "train", "--config", DEMO_CONFIG, "--set", `data.train_files=${file}`, "--set", `trainer.default_local_dir=${runDir}`,
      ]);
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr).toContain(`error: ${file}: `);
      expect(result.stderr).toContain(message);
      expect(result.stderr).not.toMatch(STACK_LINE);
      expect(result.stdout).not.toContain("starting the embedded engine");
      expect(existsSync(runDir)).toBe(false);
    });
  }
});
