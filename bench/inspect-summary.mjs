#!/usr/bin/env node
// `agentrl inspect FILE` (the summary) on synthetic trajectory files of 1k, 10k and 100k trajectories, measured side
// by side in one run: wall time of the whole CLI process and its peak RSS. Streaming shows as time growing with
// the file while peak memory stays flat. Issue 8 asks for 100k trajectories in under 10 s with bounded memory.
// Needs `npm run build` first. BENCH_SIZES=1000,10000 to run fewer. Prints a markdown section.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { synthetic } from "./lib/synthetic-trajectory.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { openTrajectoryWriter } = await import(path.join(root, "dist/data/trajectory-store.js"));
const sizes = (process.env.BENCH_SIZES ?? "1000,10000,100000").split(",").map(Number);

function measure(file) {
  // Peak RSS of the CLI process itself, reported from inside it at exit.
  const hook = "data:text/javascript," + encodeURIComponent(
    "process.on('exit', () => { const u = process.resourceUsage(); process.stderr.write('\\nRSS ' + u.maxRSS + ' CPU ' + (u.userCPUTime + u.systemCPUTime) + '\\n'); });",
  );
  const started = process.hrtime.bigint();
  const result = spawnSync(process.execPath, ["--import", hook, path.join(root, "bin/agentrl.js"), "inspect", file, "--json"], {
    cwd: root,
    encoding: "utf8",
    maxBuffer: 1 << 26,
    env: { ...process.env, NO_COLOR: "1" },
  });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (result.status !== 0) throw new Error(`inspect failed on ${file}:\n${result.stderr}`);
  const [, rssKb, cpuUs] = /RSS (\d+) CPU (\d+)/.exec(result.stderr) ?? [];
  const count = JSON.parse(result.stdout).summary.overall.count;
  return { ms, cpuMs: Number(cpuUs) / 1000, rssMb: Number(rssKb) / 1024, count };
}

// BENCH_KEEP_DIR=/some/dir keeps the generated files there (for profiling).
const keep = process.env.BENCH_KEEP_DIR;
const dir = keep ?? mkdtempSync(path.join(os.tmpdir(), "bench-inspect-"));
const rows = [];
try {
  for (const n of sizes) {
    const file = path.join(dir, `traj-${n}.parquet`);
    const writer = await openTrajectoryWriter(file, { rowGroupSize: 1024 });
    for (let i = 0; i < n; i++) await writer.write(synthetic(i));
    await writer.close();
    process.stderr.write(`wrote ${n} trajectories (${(statSync(file).size / 1e6).toFixed(1)} MB)\n`);
    const m = measure(file);
    if (m.count !== n) throw new Error(`inspect counted ${m.count}, expected ${n}`);
    rows.push({ n, mb: statSync(file).size / 1e6, ...m });
    if (!keep) rmSync(file, { force: true });
  }
} finally {
  if (!keep) rmSync(dir, { recursive: true, force: true });
}

const base = rows[0];
const lines = rows.map(
  (r) =>
    `| ${r.n.toLocaleString("en")} | ${r.mb.toFixed(1)} MB | ${(r.ms / 1000).toFixed(2)} s | ${(r.cpuMs / 1000).toFixed(2)} s | ${((r.ms * 1000) / r.n).toFixed(0)} µs | ` +
    `${r.rssMb.toFixed(0)} MB | ${(r.ms / base.ms).toFixed(2)}× | ${(r.n / base.n).toFixed(0)}× | ${(r.rssMb / base.rssMb).toFixed(2)}× |`,
);
console.log(`## Inspect: summary of a trajectory file (parquet, row groups of 1024)

Whole \`agentrl inspect FILE --json\` process (start-up included); synthetic GSM8K-like trajectories of ~300 response
tokens. CPU time (user + system) is the steadier number on a shared machine.

| trajectories | file | wall time | CPU time | wall per trajectory | peak RSS | time vs ${base.n.toLocaleString("en")} | size vs ${base.n.toLocaleString("en")} | peak RSS vs ${base.n.toLocaleString("en")} |
|---|---|---|---|---|---|---|---|---|
${lines.join("\n")}
`);
