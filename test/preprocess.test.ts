/**
 * `agentrl preprocess gsm8k`, run as a user runs it. The contract: the parquet files are what verl's GSM8K scripts
 * write (same arrow types, same HF metadata, same rows), bad input is named by file, line or row and field, and an
 * existing output is never overwritten silently or left half-written.
 *
 * The built CLI runs in its own process for the full dataset, a --json report, a bad row's exit status and message,
 * the SIGKILLed rewrites and the hub download; the other command lines run through the CLI's main() in the test
 * process (runCliInProcess: the same flags, files, exit codes and messages, without a Node start-up each). verl's
 * reference files for the three variants are made by one Python process, and compared by one.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeFileSync, readFileSync, mkdirSync, existsSync, statSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import os from "node:os";
import path from "node:path";
import { spawn } from "node:child_process";
import { CLI, REPO_ROOT, SHARED, runCli } from "./helpers/cli.js";
import { runCliInProcess } from "./helpers/in-process-cli.js";
import { pythonJson, runPython } from "./helpers/python.js";
import { readParquetInfo, streamParquetRows } from "../src/data/parquet.js";
import { tempDir as tmp } from "./helpers/tmp.js";

const GSM8K = path.join(SHARED, "datasets", "gsm8k");

async function readRows(file: string, limit = Infinity): Promise<Record<string, any>[]> {
  const rows: Record<string, any>[] = [];
  for await (const { row } of streamParquetRows(file)) {
    if (rows.length >= limit) break;
    rows.push(row);
  }
  return rows;
}

describe("preprocess gsm8k: the full dataset", () => {
  const out = tmp("full");
  beforeAll(async () => {
    const result = await runCli(["preprocess", "gsm8k", "--input", GSM8K, "--out", out]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  });

  it("writes 7473 train and 1319 test rows", async () => {
    expect((await readParquetInfo(path.join(out, "train.parquet"))).numRows).toBe(7473);
    expect((await readParquetInfo(path.join(out, "test.parquet"))).numRows).toBe(1319);
  });

  it("keeps verl's texts, ground truth and tools_kwargs in the first test row", async () => {
    const [row] = await readRows(path.join(out, "test.parquet"), 1);
    expect(row!.reward_model.ground_truth).toBe("18");
    expect(row!.agent_name).toBe("tool_agent");
    const user = row!.prompt[1];
    expect(user.role).toBe("user");
    expect(user.content.endsWith(" Let's think step by step and output the final answer after `####`.")).toBe(true);
    expect(row!.prompt[0].content).toContain("You should use the `calc_gsm8k_reward` tool");
    expect(row!.extra_info.tools_kwargs.calc_gsm8k_reward.create_kwargs.ground_truth).toBe("18");
    expect(row!.extra_info).toMatchObject({ split: "test", index: 0, need_tools_kwargs: true });
    expect(row!.extra_info.interaction_kwargs).toEqual({ query: user.content, ground_truth: "18" });
  });

  it("pyarrow reads both files with real nested types, not JSON strings", () => {
    const types = pythonJson<Record<string, Record<string, string>>>(
      `import json, sys, pyarrow.parquet as pq
print(json.dumps({s: {f.name: str(f.type) for f in pq.read_schema(f"{sys.argv[1]}/{s}.parquet")} for s in ("train", "test")}))`,
      [out],
    );
    for (const split of ["train", "test"]) {
      expect(types[split]!.prompt).toBe("list<element: struct<role: string, content: string>>");
      expect(types[split]!.reward_model).toBe("struct<style: string, ground_truth: string>");
      expect(types[split]!.extra_info).toMatch(/^struct<split: string, index: int64, answer: string, question: string, need_tools_kwargs: bool, tools_kwargs: struct<calc_gsm8k_reward: struct<create_kwargs: struct<ground_truth: string>>>, interaction_kwargs: struct<query: string, ground_truth: string>>$/);
      expect(types[split]!.data_source).toBe("string");
    }
  });
});

describe("preprocess gsm8k: parity with verl's scripts (HF datasets map + to_parquet)", () => {
  const variants = ["tool", "interaction", "plain"] as const;
  const ours = Object.fromEntries(variants.map((variant) => [variant, tmp(`ours-${variant}`)]));
  const theirs = Object.fromEntries(variants.map((variant) => [variant, tmp(`verl-${variant}`)]));
  let verdicts: Record<string, Record<string, boolean>>;
  beforeAll(async () => {
    // verl's reference script, run as its own program once per variant, in one Python process (one `datasets` import).
    const made = runPython([
      "-c",
      `import runpy, sys
script, src, *pairs = sys.argv[1:]
for variant, out in zip(pairs[::2], pairs[1::2]):
    sys.argv = [script, src, out, variant, "25"]
    runpy.run_path(script, run_name="__main__")`,
      path.join(REPO_ROOT, "test/fixtures/verl_gsm8k_reference.py"),
      GSM8K,
      ...variants.flatMap((variant) => [variant, theirs[variant]!]),
    ]);
    expect(made.code, made.stderr).toBe(0);
    for (const variant of variants) {
      const result = await runCliInProcess(["preprocess", "gsm8k", "--input", GSM8K, "--out", ours[variant]!, "--variant", variant, "--limit", "25"]);
      expect(result.code, result.stderr).toBe(0);
    }
    verdicts = pythonJson<Record<string, Record<string, boolean>>>(
      `import json, sys, pyarrow.parquet as pq
verdicts = {}
for variant, ours, theirs in zip(*[iter(sys.argv[1:])] * 3):
    out = verdicts[variant] = {}
    for s in ("train", "test"):
        a = pq.read_table(f"{ours}/{s}.parquet"); b = pq.read_table(f"{theirs}/{s}.parquet")
        out[s + "_schema"] = a.schema.equals(b.schema, check_metadata=True)
        out[s + "_rows"] = a.equals(b)
print(json.dumps(verdicts))`,
      variants.flatMap((variant) => [variant, ours[variant]!, theirs[variant]!]),
    );
  });

  for (const variant of variants) {
    it(`--variant ${variant} matches schema, HF metadata and rows`, () => {
      expect(verdicts[variant]).toEqual({ train_schema: true, train_rows: true, test_schema: true, test_rows: true });
    });
  }
});

describe("preprocess gsm8k: inputs and flags", () => {
  it("reads HF-style parquet (main/<split>-00000-of-00001.parquet) like the JSON lines", async () => {
    const input = tmp("hf");
    mkdirSync(path.join(input, "main"));
    const made = runPython([
      "-c",
      `import sys, json, pyarrow as pa, pyarrow.parquet as pq
for s in ("train", "test"):
    rows = [json.loads(l) for l, _ in zip(open(f"{sys.argv[1]}/{s}.jsonl"), range(40))]
    pq.write_table(pa.Table.from_pylist(rows), f"{sys.argv[2]}/main/{s}-00000-of-00001.parquet")`,
      GSM8K,
      input,
    ]);
    expect(made.code, made.stderr).toBe(0);
    const fromParquet = tmp("from-parquet");
    const fromJsonl = tmp("from-jsonl");
    expect((await runCliInProcess(["preprocess", "gsm8k", "-i", input, "-o", fromParquet])).code).toBe(0);
    expect((await runCliInProcess(["preprocess", "gsm8k", "-i", GSM8K, "-o", fromJsonl, "--limit", "40"])).code).toBe(0);
    expect(await readRows(path.join(fromParquet, "test.parquet"))).toEqual(await readRows(path.join(fromJsonl, "test.parquet")));
  });

  it("--split test --limit 3 --json writes one split and reports it as JSON", async () => {
    const out = tmp("split");
    const result = await runCli(["preprocess", "gsm8k", "-i", GSM8K, "-o", out, "--split", "test", "--limit", "3", "--json"]);
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout);
    expect(report.variant).toBe("tool");
    expect(report.splits).toHaveLength(1);
    expect(report.splits[0]).toMatchObject({ split: "test", rows: 3, skipped: 0, output: path.join(out, "test.parquet") });
    expect(existsSync(path.join(out, "train.parquet"))).toBe(false);
  });

  it("a single file input takes its split from the file name", async () => {
    const out = tmp("single");
    const result = await runCliInProcess(["preprocess", "gsm8k", "-i", path.join(GSM8K, "test.jsonl"), "-o", out, "--split", "test", "--limit", "2"]);
    expect(result.code, result.stderr).toBe(0);
    expect((await readParquetInfo(path.join(out, "test.parquet"))).numRows).toBe(2);
  });

  it("--variant interaction names the interaction and drops tools_kwargs", async () => {
    const out = tmp("interaction");
    expect((await runCliInProcess(["preprocess", "gsm8k", "-i", GSM8K, "-o", out, "--variant", "interaction", "--split", "test", "--limit", "1"])).code).toBe(0);
    const [row] = await readRows(path.join(out, "test.parquet"));
    expect(row!.extra_info.interaction_kwargs).toMatchObject({ name: "gsm8k", ground_truth: "18" });
    expect(row!.extra_info.tools_kwargs).toBeUndefined();
    expect(row!.prompt[0].content).toContain("You should rethinking carefully");
  });

  it("rejects bad flag values with exit code 2", async () => {
    expect((await runCliInProcess(["preprocess", "gsm8k", "-i", GSM8K, "--variant", "nope"])).code).toBe(2);
    expect((await runCliInProcess(["preprocess", "gsm8k", "-i", GSM8K, "--limit", "-4"])).code).toBe(2);
    const missing = await runCliInProcess(["preprocess", "gsm8k", "-i", "/nonexistent/gsm8k", "-o", tmp("x")]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("/nonexistent/gsm8k: no such file or folder");
  });
});

describe("preprocess gsm8k: bad input is named by file, line or row, and field", () => {
  const lines = [
    JSON.stringify({ question: "Q1?", answer: "work\n#### 1,234" }),
    JSON.stringify({ question: "Q2?", answer: "no final answer here" }),
    "{not json",
    JSON.stringify({ question: "Q4?" }),
    JSON.stringify({ question: 5, answer: "#### 5" }),
    JSON.stringify({ question: "Q6?", answer: "#### -7" }),
  ];
  const input = tmp("bad");
  writeFileSync(path.join(input, "train.jsonl"), `${lines.join("\n")}\n`);
  writeFileSync(path.join(input, "test.jsonl"), `${lines[0]}\n`);
  const trainFile = path.join(input, "train.jsonl");

  it("a row without '#### ' names file, line and field", async () => {
    const result = await runCli(["preprocess", "gsm8k", "-i", input, "-o", tmp("o1")]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`error: ${trainFile}:2: answer: no '#### <number>' final answer`);
    expect(result.stderr).toContain("--skip-invalid");
  });

  it.each([
    ["malformed JSON", 3, "malformed JSON"],
    ["a missing field", 4, "answer:"],
    ["a wrong type", 5, "question:"],
  ])("%s names its line", async (_name, line, text) => {
    const only = tmp("one");
    writeFileSync(path.join(only, "train.jsonl"), `${lines[0]}\n${lines[line - 1]}\n`);
    const result = await runCliInProcess(["preprocess", "gsm8k", "-i", only, "-o", tmp("o"), "--split", "train"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`${path.join(only, "train.jsonl")}:2: ${text}`);
  });

  it("--skip-invalid skips them, reports how many and keeps commas out of the ground truth", async () => {
    const out = tmp("skip");
    const result = await runCliInProcess(["preprocess", "gsm8k", "-i", input, "-o", out, "--skip-invalid", "--json"]);
    expect(result.code, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout);
    expect(report.splits[0]).toMatchObject({ split: "train", rows: 2, skipped: 4 });
    expect(report.splits[0].firstSkipped.map((s: { place: string }) => s.place)).toEqual(
      [2, 3, 4, 5].map((n) => `${trainFile}:${n}`),
    );
    const rows = await readRows(path.join(out, "train.parquet"));
    expect(rows.map((r) => r.reward_model.ground_truth)).toEqual(["1234", "-7"]);
    expect(rows.map((r) => r.extra_info.index)).toEqual([0, 1]);
  });

  it("a bad parquet row names the file and row", async () => {
    const hf = tmp("badpq");
    const made = runPython([
      "-c",
      `import sys, pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.Table.from_pylist([{"question": "a", "answer": "#### 1"}, {"question": "b", "answer": "none"}]), sys.argv[1] + "/train.parquet")`,
      hf,
    ]);
    expect(made.code, made.stderr).toBe(0);
    const result = await runCliInProcess(["preprocess", "gsm8k", "-i", hf, "-o", tmp("o"), "--split", "train"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`${path.join(hf, "train.parquet")}: row 1: answer: no '#### <number>' final answer`);
  });

  it("a file that is not parquet is a clear error", async () => {
    const hf = tmp("notpq");
    writeFileSync(path.join(hf, "train.parquet"), "this is not parquet");
    const result = await runCliInProcess(["preprocess", "gsm8k", "-i", hf, "-o", tmp("o"), "--split", "train"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`${path.join(hf, "train.parquet")}: not a readable parquet file`);
  });
});

describe("preprocess gsm8k: outputs are never lost or half-written", () => {
  it("an existing output is an error without --force, and is left untouched", async () => {
    const out = tmp("exists");
    writeFileSync(path.join(out, "test.parquet"), "precious");
    const result = await runCliInProcess(["preprocess", "gsm8k", "-i", GSM8K, "-o", out, "--limit", "2"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("output already exists");
    expect(readFileSync(path.join(out, "test.parquet"), "utf8")).toBe("precious");
    expect(existsSync(path.join(out, "train.parquet"))).toBe(false);
    const forced = await runCliInProcess(["preprocess", "gsm8k", "-i", GSM8K, "-o", out, "--limit", "2", "--force"]);
    expect(forced.code).toBe(0);
    expect((await readParquetInfo(path.join(out, "test.parquet"))).numRows).toBe(2);
  });

  it("SIGKILL at any point of a --force rewrite leaves each output whole: old or new, never partial", async () => {
    const out = tmp("atomic");
    expect((await runCliInProcess(["preprocess", "gsm8k", "-i", GSM8K, "-o", out, "--limit", "100"])).code).toBe(0);
    const before = statSync(path.join(out, "train.parquet")).size;
    const seen = new Set<number>();
    for (const delayMs of [50, 150, 250, 350, 450, 600, 800]) {
      const child = spawn(process.execPath, [CLI, "preprocess", "gsm8k", "-i", GSM8K, "-o", out, "--force"], { stdio: "ignore" });
      // Listening from the start: the whole rewrite takes about 0.7 s, so the later kills can come after it exited.
      const closed = new Promise((resolve) => child.on("close", resolve));
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      child.kill("SIGKILL");
      await closed;
      for (const split of ["train", "test"]) {
        const rows = (await readParquetInfo(path.join(out, `${split}.parquet`))).numRows;
        expect([100, split === "train" ? 7473 : 1319]).toContain(rows);
        if (split === "train") seen.add(rows);
      }
    }
    // The kills must have landed before the rewrite finished at least once, or the test proved nothing.
    expect(seen.has(100) || statSync(path.join(out, "train.parquet")).size === before).toBe(true);
  });
});

describe("preprocess gsm8k without --input: the Hugging Face hub download", () => {
  let server: Server;
  let endpoint = "";
  const hub = tmp("hub");
  beforeAll(async () => {
    const made = runPython([
      "-c",
      `import sys, json, pyarrow as pa, pyarrow.parquet as pq
for s in ("train", "test"):
    rows = [json.loads(l) for l, _ in zip(open(f"{sys.argv[1]}/{s}.jsonl"), range(10))]
    pq.write_table(pa.Table.from_pylist(rows), f"{sys.argv[2]}/{s}.parquet")`,
      GSM8K,
      hub,
    ]);
    expect(made.code, made.stderr).toBe(0);
    server = createServer((req, res) => {
      const match = /^\/datasets\/openai\/gsm8k\/resolve\/main\/main\/(train|test)-00000-of-00001\.parquet$/.exec(req.url ?? "");
      if (!match) {
        res.writeHead(404).end("not found");
        return;
      }
      const body = readFileSync(path.join(hub, `${match[1]}.parquet`));
      res.writeHead(200, { "content-length": body.length }).end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    endpoint = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  });
  afterAll(() => server?.close());

  it("downloads the two parquet files into the cache and preprocesses them", async () => {
    const cache = tmp("cache");
    const out = tmp("dl");
    const result = await runCli(["preprocess", "gsm8k", "-o", out, "--json"], { env: { HF_ENDPOINT: endpoint, AGENTRL_CACHE: cache } });
    expect(result.code, result.stderr).toBe(0);
    expect(existsSync(path.join(cache, "datasets/openai--gsm8k/main/train-00000-of-00001.parquet"))).toBe(true);
    expect((await readParquetInfo(path.join(out, "train.parquet"))).numRows).toBe(10);
  });

  it("offline, it fails with a clear error that points to --input", async () => {
    const result = await runCliInProcess(["preprocess", "gsm8k", "-o", tmp("off")], {
      env: { HF_ENDPOINT: "http://127.0.0.1:9", AGENTRL_CACHE: tmp("cache-off") },
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/error: could not download http:\/\/127\.0\.0\.1:9\/.* the machine looks offline/);
    expect(result.stderr).toContain("hint: pass --input");
  });
});

afterAll(() => {
  rmSync(path.join(os.tmpdir(), "agentrl-never-created"), { recursive: true, force: true });
});
