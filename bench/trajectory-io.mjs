#!/usr/bin/env node
// Trajectory write and read (issue 9's data path) at 1k, 10k and 100k trajectories, parquet and jsonl, measured side
// by side in one run. Write goes through openTrajectoryWriter the way `agentrl rollout` uses it (one awaited write
// per finished trajectory, the parquet pending.jsonl journal and its parts, then close() merging them); read goes
// through readTrajectories, which validates every record with zod. Each operation runs in its own child process, so
// its peak RSS is its own; a "generate only" child makes the same synthetic records and writes nothing, which is
// the part of the write rows that is not I/O. Needs `npm run build` first. BENCH_SIZES=1000,10000 to run fewer.
// Prints a markdown section; bench/run.mjs collects it into docs/benchmarks.md.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { synthetic } from "./lib/synthetic-trajectory.mjs";

const here = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(here), "..");

// --- child: one operation, then one JSON line on stdout -----------------------------------------------------------

/** Runs `op` on `n` trajectories and reports its own wall and CPU time, and the process's peak RSS. */
async function child(op, file, n) {
  // Loaded before the clock starts in every mode (generate included), so module loading is in no time column and
  // in every RSS number alike.
  const { openTrajectoryWriter, readTrajectories } = await import(path.join(root, "dist/data/trajectory-store.js"));
  const cpuBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  let count = 0;
  let tokens = 0;
  if (op === "generate") {
    for (let i = 0; i < n; i++) {
      tokens += synthetic(i).response_ids.length;
      count += 1;
    }
  } else if (op === "write") {
    const writer = await openTrajectoryWriter(file);
    for (let i = 0; i < n; i++) {
      const t = synthetic(i);
      tokens += t.response_ids.length;
      await writer.write(t);
    }
    await writer.close();
    count = writer.written;
  } else if (op === "read") {
    for await (const t of readTrajectories(file)) {
      tokens += t.response_ids.length;
      count += 1;
    }
  } else {
    throw new Error(`unknown operation ${op}`);
  }
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const cpu = process.cpuUsage(cpuBefore);
  const rssKb = process.resourceUsage().maxRSS; // kilobytes, whole process life
  process.stdout.write(`${JSON.stringify({ ms, cpuMs: (cpu.user + cpu.system) / 1000, rssKb, count, tokens })}\n`);
}

// --- parent: the sweep ----------------------------------------------------------------------------------------------

const sizes = (process.env.BENCH_SIZES ?? "1000,10000,100000").split(",").map(Number);

function run(op, file, n) {
  const result = spawnSync(process.execPath, [here, "--child", op, file, String(n)], { cwd: root, encoding: "utf8" });
  if (result.status !== 0) throw new Error(`${op} ${file} (${n}) failed with exit code ${result.status}:\n${result.stderr}`);
  return JSON.parse(result.stdout.trim().split("\n").at(-1));
}

/** Sum of response lengths of synthetic(0..n-1): what every read must see again, token count for token count. */
function expectedTokens(n) {
  let sum = 0;
  for (let i = 0; i < n; i++) sum += synthetic(i).response_ids.length;
  return sum;
}

async function sweep() {
  const dir = mkdtempSync(path.join(os.tmpdir(), "bench-trajectory-io-"));
  const rows = [];
  try {
    for (const n of sizes) {
      const tokens = expectedTokens(n);
      const check = (what, m) => {
        if (m.count !== n) throw new Error(`${what}: ${m.count} trajectories, expected ${n}`);
        if (m.tokens !== tokens) throw new Error(`${what}: ${m.tokens} response tokens, expected ${tokens}`);
      };
      const generated = run("generate", "-", n);
      check(`generate ${n}`, generated);
      rows.push({ op: "generate only", format: "–", n, bytes: undefined, ...generated });
      for (const format of ["parquet", "jsonl"]) {
        const file = path.join(dir, `traj-${n}.${format}`);
        const written = run("write", file, n);
        check(`write ${file}`, written);
        if (existsSync(`${file}.parts`)) throw new Error(`${file}.parts is still there after close()`);
        const bytes = statSync(file).size;
        rows.push({ op: "write", format, n, bytes, ...written });
        const read = run("read", file, n);
        check(`read ${file}`, read);
        rows.push({ op: "read", format, n, bytes, ...read });
        rmSync(file, { force: true });
        process.stderr.write(
          `${n} ${format}: write ${(written.ms / 1000).toFixed(2)} s, read ${(read.ms / 1000).toFixed(2)} s, ${(bytes / 1e6).toFixed(1)} MB\n`,
        );
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const opOrder = ["generate only", "write", "read"];
  const formatOrder = ["–", "parquet", "jsonl"];
  rows.sort(
    (a, b) =>
      opOrder.indexOf(a.op) - opOrder.indexOf(b.op) || formatOrder.indexOf(a.format) - formatOrder.indexOf(b.format) || a.n - b.n,
  );
  const smallest = Math.min(...sizes);
  const baseOf = (r) => rows.find((b) => b.op === r.op && b.format === r.format && b.n === smallest);
  const mb = (bytes) => (bytes === undefined ? "–" : `${(bytes / 1e6).toFixed(1)} MB`);
  const lines = rows.map((r) => {
    const base = baseOf(r);
    return (
      `| ${r.op} | ${r.format} | ${r.n.toLocaleString("en")} | ${mb(r.bytes)} | ${(r.ms / 1000).toFixed(2)} s | ` +
      `${(r.cpuMs / 1000).toFixed(2)} s | ${((r.ms * 1000) / r.n).toFixed(0)} µs | ${(r.rssKb / 1024).toFixed(0)} MB | ` +
      `${(r.ms / base.ms).toFixed(1)}× | ${(r.cpuMs / base.cpuMs).toFixed(1)}× | ${(r.rssKb / base.rssKb).toFixed(2)}× |`
    );
  });
  const s = smallest.toLocaleString("en");
  console.log(`## Data path: trajectory write and read

Synthetic GSM8K-like tool trajectories (~150 prompt and ~300 response tokens, 3 segments, one tool call; the records
of the inspect benchmark). Write: \`openTrajectoryWriter\` as \`agentrl rollout\` uses it, one awaited write per
trajectory; parquet with the default 256 trajectories per part/row group, including its pending.jsonl journal and the
merge on \`close()\`. Read: every record back through \`readTrajectories\`, zod-validated; counts and token totals are
checked against what was written. Each row is its own process: times cover the operation only (not Node start-up or
module loading); peak RSS is the whole process's. "Generate only" makes the same records and writes nothing: it is
the part of each write row that is not the store. CPU time (user + system) is the steadier number on a shared
machine. Growth columns compare with the same operation at ${s} trajectories (the sizes grow 10× per step); at
${s} a fixed cost is a large share (the time per trajectory falls with size), so time grows less than 10× per step
at first.

| operation | format | trajectories | file | wall time | CPU time | wall per trajectory | peak RSS | time vs ${s} | CPU vs ${s} | peak RSS vs ${s} |
|---|---|---|---|---|---|---|---|---|---|---|
${lines.join("\n")}
`);
}

if (process.argv[2] === "--child") {
  const [, , , op, file, n] = process.argv;
  await child(op, file, Number(n));
} else {
  await sweep();
}
