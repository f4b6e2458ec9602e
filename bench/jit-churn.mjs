#!/usr/bin/env node
/**
 * What V8's optimizing compiler still does once the rollout client is warm: rollout-overhead.mjs's
 * distinct-conversations cell (n = 1 over 1,024 GSM8K questions, distinct turns and tool answers, concurrency 256,
 * strict drift check, parquet, reward) in a child process under `--trace-opt --trace-deopt`, 3 cells of warm-up and
 * then 3 measured ones. Reported for the measured cells: the compile time V8 logged (its three phases summed; it runs
 * on the helper threads, so it is CPU the client pays), the deoptimizations by function and reason (each one throws
 * the function's optimized code away, and it is compiled again once hot), and the process's CPU per turn, its main
 * thread's and its helper threads' (/proc/self/task). Unlike CPU time on this machine, the compile log barely moves
 * between runs of one build: a deoptimization loop shows as the same function compiled again in every cell.
 *
 * With `--keep-client` the cells share one engine client and config, as `agentrl train` keeps its client from step to
 * step (and a long `agentrl rollout` its one client): without it each cell makes its own, as the rollout-overhead
 * bench does, and its 256 connections' opening and closing are compiled again in every cell.
 *
 *   npm run build && node bench/jit-churn.mjs                  # this tree
 *   node bench/jit-churn.mjs --keep-client                     # one client for every cell
 *   node bench/jit-churn.mjs --base OTHER_CHECKOUT [--pairs 2]  # another built tree too, the two alternating
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { cliNodeFlags } from "./lib/cli-node-flags.mjs";
import { median } from "./lib/table-format.mjs";
import { threadCpu } from "./lib/thread-cpu.mjs";

const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), "..");
const { values: options } = parseArgs({
  options: {
    base: { type: "string" },
    pairs: { type: "string", default: "1" },
    warmup: { type: "string", default: "3" },
    cells: { type: "string", default: "3" },
    "keep-client": { type: "boolean", default: false },
    child: { type: "string" },
  },
});
const MARK = "JIT-CHURN MEASURED CELLS START";
const CONCURRENCY = 256;
const TRAJECTORIES = 1024;

/** In the child: the cells of `tree`'s dist/ against the server at FAKE_URL; the result as the last stdout line. */
async function child(tree) {
  const lib = await import(pathToFileURL(path.join(tree, "bench/lib/gsm8k-tool-workload.mjs")).href);
  const { playDistinctCell } = await import(pathToFileURL(path.join(tree, "bench/lib/distinct-cell.mjs")).href);
  const cell = {
    lib,
    runRollout: (await lib.loadDist("rollout/run-rollout.js")).runRollout,
    makeClient: (await lib.loadDist("rollout/setup.js")).makeClient,
    openTrajectoryWriter: (await lib.loadDist("data/trajectory-store.js")).openTrajectoryWriter,
  };
  let kept;
  if (options["keep-client"]) {
    // Every cell gets this config and client; the cell's close of the client is put off to the end.
    const config = lib.toolRollout(CONCURRENCY, { n: 1, seed: 7 });
    config.server.urls = [process.env.FAKE_URL];
    const client = cell.makeClient(config, undefined);
    kept = client.close.bind(client);
    client.close = async () => undefined;
    cell.lib = { ...lib, toolRollout: () => config };
    cell.makeClient = () => client;
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), "agentrl-bench-jit-"));
  try {
    let files = 0;
    const play = () => playDistinctCell(cell, process.env.FAKE_URL, path.join(dir, `${files++}.parquet`), { concurrency: CONCURRENCY, trajectories: TRAJECTORIES });
    for (let i = 0; i < Number(options.warmup); i++) await play();
    console.log(MARK);
    const cpu = process.cpuUsage();
    const threads = threadCpu();
    let turns = 0;
    for (let i = 0; i < Number(options.cells); i++) turns += await play();
    const used = process.cpuUsage(cpu);
    const after = threadCpu();
    console.log(JSON.stringify({ turns, cpuPerTurnUs: (used.user + used.system) / turns, mainPerTurnUs: (after.main - threads.main) / turns, helpersPerTurnUs: (after.helpers - threads.helpers) / turns }));
  } finally {
    await kept?.();
    await lib.parts.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One child run of `tree`, its V8 log read for the measured cells. */
function measure(tree, fakeUrl) {
  const keep = options["keep-client"] ? ["--keep-client"] : [];
  const run = spawnSync(process.execPath, [...cliNodeFlags(), "--trace-opt", "--trace-deopt", self, "--child", tree, "--warmup", options.warmup, "--cells", options.cells, ...keep], {
    env: { ...process.env, FAKE_URL: fakeUrl },
    encoding: "utf8",
    maxBuffer: 1 << 30,
  });
  if (run.status !== 0) throw new Error(`jit-churn child for ${tree} exited with ${run.status}: ${run.stderr.slice(-2000)}`);
  const lines = run.stdout.split("\n");
  const measured = lines.slice(lines.indexOf(MARK) + 1);
  const result = JSON.parse(measured.filter((line) => line.startsWith("{")).at(-1));
  let compileMs = 0;
  let compiles = 0;
  const deopts = new Map();
  const compiled = new Map();
  for (const line of measured) {
    const took = /^\[completed compiling \S+ <JSFunction ([^ (]*) ?\(sfi.* took ([\d.]+), ([\d.]+), ([\d.]+) ms\]/.exec(line);
    if (took) {
      const ms = Number(took[2]) + Number(took[3]) + Number(took[4]);
      compiles++;
      compileMs += ms;
      const name = took[1] || "(anonymous)";
      compiled.set(name, (compiled.get(name) ?? 0) + ms);
      continue;
    }
    const bailout = /^\[bailout \(kind: deopt-[a-z]+, reason: ([^)]*)\): begin\. deoptimizing \S+ <JSFunction (\S*)/.exec(line);
    if (bailout) {
      const key = `${bailout[2] || "(anonymous)"}: ${bailout[1]}`;
      deopts.set(key, (deopts.get(key) ?? 0) + 1);
    }
  }
  return { ...result, compileMs, compiles, compileUsPerTurn: (compileMs * 1000) / result.turns, deopts, compiled };
}

async function parent() {
  const lib = await import("./lib/gsm8k-tool-workload.mjs");
  const { startFakeSglangProcess } = await import("./lib/fake-sglang-process.mjs");
  const fake = await startFakeSglangProcess(lib.root, { ...lib.story, ...lib.distinctTurns() });
  const trees = options.base ? [path.resolve(options.base), root] : [root];
  const runs = new Map(trees.map((tree) => [tree, []]));
  try {
    for (let pair = 0; pair < Number(options.pairs); pair++) {
      for (const tree of pair % 2 === 0 ? trees : [...trees].reverse()) {
        const result = measure(tree, fake.url);
        runs.get(tree).push(result);
        process.stderr.write(`jit-churn: ${tree}: ${result.compileMs.toFixed(0)} ms compiling in ${result.compiles} compiles, ${[...result.deopts.values()].reduce((a, b) => a + b, 0)} deopts, ${result.cpuPerTurnUs.toFixed(0)} µs a turn\n`);
      }
    }
  } finally {
    await fake.stop();
    await lib.parts.close();
  }
  const out = [
    "## jit-churn.mjs: V8's compiling after warm-up, on the distinct-conversations cell",
    "",
    `${options.warmup} cells of warm-up, then ${options.cells} measured (${TRAJECTORIES} trajectories each, ${CONCURRENCY} at once), ${options["keep-client"] ? "one engine client for all of them" : "a client per cell"}, in a child process per tree and run; medians over runs.`,
    "",
    "| tree | compile ms (runs) | µs of compiling a turn | compiles | deopts | CPU a turn | main thread | helper threads |",
    "|---|---|---|---|---|---|---|---|",
  ];
  for (const [tree, list] of runs) {
    const pick = (key) => median(list.map((r) => r[key]));
    const deopts = median(list.map((r) => [...r.deopts.values()].reduce((a, b) => a + b, 0)));
    out.push(`| ${tree} | ${pick("compileMs").toFixed(0)} (${list.map((r) => r.compileMs.toFixed(0)).join(", ")}) | ${pick("compileUsPerTurn").toFixed(0)} | ${pick("compiles")} | ${deopts} | ${pick("cpuPerTurnUs").toFixed(0)} µs | ${pick("mainPerTurnUs").toFixed(0)} µs | ${pick("helpersPerTurnUs").toFixed(0)} µs |`);
  }
  const last = runs.get(root).at(-1);
  out.push("", `Deoptimizations in the measured cells of this tree's last run (function: reason, count):`, "");
  for (const [key, count] of [...last.deopts].sort((a, b) => b[1] - a[1])) out.push(`- ${key}: ${count}`);
  out.push("", "The functions compiled longest in those cells (ms, all their compiles):", "");
  for (const [name, ms] of [...last.compiled].sort((a, b) => b[1] - a[1]).slice(0, 15)) out.push(`- ${name}: ${ms.toFixed(1)}`);
  process.stdout.write(`${out.join("\n")}\n`);
}

if (options.child) await child(options.child);
else await parent();
