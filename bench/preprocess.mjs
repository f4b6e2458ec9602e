#!/usr/bin/env node
// Full GSM8K (7473 + 1319 rows) through `agentrl preprocess gsm8k`, next to verl's way of making the same files
// (HF `datasets` map + to_parquet, test/fixtures/verl_gsm8k_reference.py), measured side by side in one run.
// Prints a markdown section; bench/run.mjs collects it into docs/benchmarks.md.
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const gsm8k = path.resolve(root, "..", "shared", "datasets", "gsm8k");
const runs = Number(process.env.BENCH_RUNS ?? 3);

function time(cmd, args) {
  const started = process.hrtime.bigint();
  const result = spawnSync(cmd, args, { cwd: root, encoding: "utf8" });
  if (result.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed:\n${result.stderr}`);
  return Number(process.hrtime.bigint() - started) / 1e6;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ours = [];
const theirs = [];
for (let i = 0; i < runs; i++) {
  ours.push(time(process.execPath, [path.join(root, "bin/agentrl.js"), "preprocess", "gsm8k", "--input", gsm8k, "--out", mkdtempSync(path.join(os.tmpdir(), "bench-pp-")), "--json"]));
  theirs.push(time(path.join(root, ".venv/bin/python"), [path.join(root, "test/fixtures/verl_gsm8k_reference.py"), gsm8k, mkdtempSync(path.join(os.tmpdir(), "bench-verl-")), "tool", "100000"]));
}
const a = median(ours);
const b = median(theirs);
console.log(`## Preprocess: full GSM8K (8,792 rows), median of ${runs}

| pipeline | wall time (whole process) |
|---|---|
| \`agentrl preprocess gsm8k\` | ${(a / 1000).toFixed(2)} s |
| verl's script logic (HF datasets map + to_parquet) | ${(b / 1000).toFixed(2)} s |
| ratio (verl / agentrl) | ${(b / a).toFixed(2)}× |
`);
