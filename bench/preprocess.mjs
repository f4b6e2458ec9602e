#!/usr/bin/env node
// `agentrl preprocess gsm8k`, measured side by side in one run, in two parts:
// 1. Full GSM8K (7473 + 1319 rows) next to verl's way of making the same files (HF `datasets` map + to_parquet,
//    test/fixtures/verl_gsm8k_reference.py), median of BENCH_RUNS (3).
// 2. A size sweep (issue 9's data path): 1k, 10k and 100k input rows (BENCH_SIZES), made by repeating the real GSM8K
//    lines, each in its own process, with wall and CPU time, peak RSS, and how each grows with size.
// Needs `npm run build` first. Prints a markdown section; bench/run.mjs collects it into docs/benchmarks.md.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const gsm8k = path.resolve(root, "..", "shared", "datasets", "gsm8k");
const runs = Number(process.env.BENCH_RUNS ?? 3);
const sizes = (process.env.BENCH_SIZES ?? "1000,10000,100000").split(",").map(Number);
const agentrl = path.join(root, "bin/agentrl.js");

function time(cmd, args) {
  const started = process.hrtime.bigint();
  const result = spawnSync(cmd, args, { cwd: root, encoding: "utf8" });
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed:\n${result.stderr}`);
  return Number(process.hrtime.bigint() - started) / 1e6;
}

// Peak RSS and CPU time of the CLI process itself, reported from inside it at exit.
const exitReportHook =
  "data:text/javascript," +
  encodeURIComponent(
    "process.on('exit', () => { const u = process.resourceUsage(); process.stderr.write('\\nRSS ' + u.maxRSS + ' CPU ' + (u.userCPUTime + u.systemCPUTime) + '\\n'); });",
  );

/** One `agentrl preprocess gsm8k` process on `input`: wall time, CPU time, peak RSS, rows and bytes written. */
function measurePreprocess(input, out) {
  const started = process.hrtime.bigint();
  const result = spawnSync(process.execPath, ["--import", exitReportHook, agentrl, "preprocess", "gsm8k", "--input", input, "--out", out, "--json"], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, NO_COLOR: "1" },
  });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (result.status !== 0) throw new Error(`preprocess ${input} failed:\n${result.stderr}`);
  const [, rssKb, cpuUs] = /RSS (\d+) CPU (\d+)/.exec(result.stderr) ?? [];
  if (rssKb === undefined) throw new Error(`preprocess ${input}: no RSS report on stderr:\n${result.stderr}`);
  const splits = JSON.parse(result.stdout).splits;
  return {
    ms,
    cpuMs: Number(cpuUs) / 1000,
    rssMb: Number(rssKb) / 1024,
    rows: splits.reduce((sum, s) => sum + s.rows, 0),
    bytes: splits.reduce((sum, s) => sum + s.bytes, 0),
  };
}

/** Writes `count` lines to `file`, cycling through `lines`. */
function writeRepeated(file, lines, count) {
  const out = [];
  for (let i = 0; i < count; i++) out.push(lines[i % lines.length]);
  writeFileSync(file, `${out.join("\n")}\n`);
}

const readLines = (file) => readFileSync(file, "utf8").split("\n").filter((line) => line.trim() !== "");
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const work = mkdtempSync(path.join(os.tmpdir(), "bench-pp-"));
let comparison;
const sweep = [];
try {
  // Part 1: full GSM8K, agentrl against verl's script logic.
  const ours = [];
  const theirs = [];
  for (let i = 0; i < runs; i++) {
    ours.push(time(process.execPath, [agentrl, "preprocess", "gsm8k", "--input", gsm8k, "--out", path.join(work, `ours-${i}`), "--json"]));
    theirs.push(time(path.join(root, ".venv/bin/python"), [path.join(root, "test/fixtures/verl_gsm8k_reference.py"), gsm8k, path.join(work, `verl-${i}`), "tool", "100000"]));
  }
  comparison = { ours: median(ours), theirs: median(theirs) };

  // Part 2: the size sweep. Each size keeps GSM8K's train/test proportion (7473 : 1319).
  const train = readLines(path.join(gsm8k, "train.jsonl"));
  const test = readLines(path.join(gsm8k, "test.jsonl"));
  for (const n of sizes) {
    const input = path.join(work, `input-${n}`);
    mkdirSync(input);
    const trainRows = Math.round((n * train.length) / (train.length + test.length));
    writeRepeated(path.join(input, "train.jsonl"), train, trainRows);
    writeRepeated(path.join(input, "test.jsonl"), test, n - trainRows);
    const m = measurePreprocess(input, path.join(work, `out-${n}`));
    if (m.rows !== n) throw new Error(`preprocess wrote ${m.rows} rows from ${n} input rows`);
    sweep.push({ n, ...m });
    process.stderr.write(`preprocess ${n} rows: ${(m.ms / 1000).toFixed(2)} s, peak RSS ${m.rssMb.toFixed(0)} MB\n`);
    rmSync(input, { recursive: true, force: true });
    rmSync(path.join(work, `out-${n}`), { recursive: true, force: true });
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}

const { ours: a, theirs: b } = comparison;
const base = sweep[0];
const s = base.n.toLocaleString("en");
const sweepLines = sweep.map(
  (r) =>
    `| ${r.n.toLocaleString("en")} | ${(r.bytes / 1e6).toFixed(1)} MB | ${(r.ms / 1000).toFixed(2)} s | ${(r.cpuMs / 1000).toFixed(2)} s | ` +
    `${((r.ms * 1000) / r.n).toFixed(0)} µs | ${r.rssMb.toFixed(0)} MB | ${(r.ms / base.ms).toFixed(1)}× | ${(r.cpuMs / base.cpuMs).toFixed(1)}× | ${(r.rssMb / base.rssMb).toFixed(2)}× |`,
);
console.log(`## Preprocess: full GSM8K (8,792 rows), median of ${runs}

| pipeline | wall time (whole process) |
|---|---|
| \`agentrl preprocess gsm8k\` | ${(a / 1000).toFixed(2)} s |
| verl's script logic (HF datasets map + to_parquet) | ${(b / 1000).toFixed(2)} s |
| ratio (verl / agentrl) | ${(b / a).toFixed(2)}× |

### Preprocess: size sweep

\`agentrl preprocess gsm8k --input DIR\` (tool variant, both splits) on inputs of ${sizes.map((n) => n.toLocaleString("en")).join(", ")} rows, made by
repeating GSM8K's train and test lines in their 7473 : 1319 proportion. One process per size; wall time is the whole
process (Node start-up included), CPU time is user + system, peak RSS is the process's maximum. Growth columns compare
with ${s} rows (the sizes grow 10× per step).

| input rows | output (both splits) | wall time | CPU time | wall per row | peak RSS | time vs ${s} | CPU vs ${s} | peak RSS vs ${s} |
|---|---|---|---|---|---|---|---|---|
${sweepLines.join("\n")}
`);
