#!/usr/bin/env node
/**
 * The CLI's young generation (V8's --max-semi-space-size, set by bin/agentrl.js's launcher) against the rollout
 * client's CPU per turn, side by side: rollout-overhead.mjs's distinct-conversations cell (n = 1 over 1,024 GSM8K
 * questions, distinct turns and tool answers, concurrency 256, strict drift check, parquet, reward) in child processes,
 * one per size and pair, taking turns (a, b, b, a, …) against one fake SGLang server (its own process). A flag is per
 * process, so the sizes cannot share one. Each child warms up (JIT, sockets, word memo: 3 runs) and then measures 3:
 * its CPU per turn (process.cpuUsage: every thread, so the scavenger's helper threads count), the main thread's GC
 * pauses per turn (perf_hooks), and its peak RSS. Reported: medians per size, and the median over pairs of each size's
 * CPU over the first size's.
 *
 *   npm run build && node bench/young-generation.mjs [--sizes 64,128] [--pairs 5] [--json]
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { PerformanceObserver } from "node:perf_hooks";
import { playDistinctCell } from "./lib/distinct-cell.mjs";
import { startFakeSglangProcess } from "./lib/fake-sglang-process.mjs";
import { median } from "./lib/table-format.mjs";

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};
const CONCURRENCY = 256;
const TRAJECTORIES = 1024;

/** In a child: warm up, then measure `runs` runs of the cell against the server at FAKE_URL; prints one JSON line. */
async function child() {
  const lib = await import("./lib/gsm8k-tool-workload.mjs");
  const { runRollout } = await lib.loadDist("rollout/run-rollout.js");
  const { makeClient } = await lib.loadDist("rollout/setup.js");
  const { openTrajectoryWriter } = await lib.loadDist("data/trajectory-store.js");
  const outDir = mkdtempSync(path.join(os.tmpdir(), "agentrl-bench-young-"));
  let gcMs = 0;
  let counting = false;
  new PerformanceObserver((list) => {
    if (counting) for (const entry of list.getEntries()) gcMs += entry.duration;
  }).observe({ entryTypes: ["gc"] });
  let files = 0;
  const tree = { lib, runRollout, makeClient, openTrajectoryWriter };
  const run = () =>
    playDistinctCell(tree, process.env.FAKE_URL, path.join(outDir, `run-${files++}.parquet`), { concurrency: CONCURRENCY, trajectories: TRAJECTORIES });
  try {
    for (let i = 0; i < 3; i++) await run();
    counting = true;
    const cpu0 = process.cpuUsage();
    let turns = 0;
    for (let i = 0; i < 3; i++) turns += await run();
    const cpu = process.cpuUsage(cpu0);
    counting = false;
    const result = { cpuPerTurnUs: (cpu.user + cpu.system) / turns, gcPausePerTurnUs: (gcMs * 1000) / turns, maxRssMb: process.resourceUsage().maxRSS / 1024 };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await lib.parts.close();
    rmSync(outDir, { recursive: true, force: true });
  }
}

async function parent() {
  const sizes = flag("sizes", "64,128").split(",").map(Number);
  const pairs = Number(flag("pairs", "5"));
  if (sizes.length < 2 || sizes.some((size) => !(size > 0)) || !(pairs > 0)) {
    console.error("usage: young-generation.mjs [--sizes 64,128] [--pairs N] [--json]");
    process.exit(2);
  }
  const lib = await import("./lib/gsm8k-tool-workload.mjs");
  const fake = await startFakeSglangProcess(lib.root, { ...lib.story, ...lib.distinctTurns() });
  const rows = new Map(sizes.map((size) => [size, []]));
  const ratios = new Map(sizes.slice(1).map((size) => [size, []]));
  const started = performance.now();
  try {
    for (let pair = 0; pair < pairs; pair++) {
      const order = pair % 2 === 0 ? sizes : [...sizes].reverse();
      const got = new Map();
      for (const size of order) {
        const run = spawnSync(process.execPath, [`--max-semi-space-size=${size}`, fileURLToPath(import.meta.url), "--child"], {
          env: { ...process.env, FAKE_URL: fake.url },
          encoding: "utf8",
          stdio: ["ignore", "pipe", "inherit"],
        });
        if (run.status !== 0) throw new Error(`child at ${size} MB exited with ${run.status}`);
        got.set(size, JSON.parse(run.stdout.trim().split("\n").at(-1)));
        rows.get(size).push(got.get(size));
      }
      for (const size of sizes.slice(1)) ratios.get(size).push(got.get(size).cpuPerTurnUs / got.get(sizes[0]).cpuPerTurnUs);
      process.stderr.write(`young-generation: pair ${pair + 1}/${pairs}: ${order.map((s) => `${s} MB ${got.get(s).cpuPerTurnUs.toFixed(0)} µs`).join(", ")}\n`);
    }
  } finally {
    await fake.stop();
    await lib.parts.close();
  }
  const pick = (list, key) => median(list.map((r) => r[key]));
  const result = {
    pairs,
    seconds: (performance.now() - started) / 1000,
    sizes: sizes.map((size) => ({
      semiSpaceMb: size,
      cpuPerTurnUs: pick(rows.get(size), "cpuPerTurnUs"),
      gcPausePerTurnUs: pick(rows.get(size), "gcPausePerTurnUs"),
      maxRssMb: pick(rows.get(size), "maxRssMb"),
      ratio: size === sizes[0] ? 1 : median(ratios.get(size)),
      ratioRange: size === sizes[0] ? [1, 1] : [Math.min(...ratios.get(size)), Math.max(...ratios.get(size))],
    })),
  };
  if (args.includes("--json")) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return;
  }
  const lines = [
    "## young-generation.mjs: the CLI's young generation against the rollout client's CPU per turn",
    "",
    `The distinct-conversations cell (concurrency ${CONCURRENCY}, ${TRAJECTORIES} trajectories a run, 3 measured runs after 3 of warm-up) in one ` +
      "child process per size and pair, the sizes alternating; medians over pairs.",
    "",
    "| max semi-space | CPU per turn | main-thread GC pauses per turn | peak RSS | CPU ratio to the first (pairs' range) |",
    "|---|---|---|---|---|",
    ...result.sizes.map(
      (s) =>
        `| ${s.semiSpaceMb} MB | ${s.cpuPerTurnUs.toFixed(0)} µs | ${s.gcPausePerTurnUs.toFixed(0)} µs | ${s.maxRssMb.toFixed(0)} MB | ` +
        `${s.ratio.toFixed(3)} (${s.ratioRange[0].toFixed(3)}–${s.ratioRange[1].toFixed(3)}) |`,
    ),
  ];
  process.stdout.write(`${lines.join("\n")}\n\n${pairs} pairs, ${result.seconds.toFixed(0)} s.\n`);
}

if (args.includes("--child")) await child();
else await parent();
