#!/usr/bin/env node
/**
 * The rollout client's CPU per turn on distinct conversations, this tree against another built tree, side by side in
 * one process: what a change to the client saves, measured on a machine whose speed drifts by more than the change.
 *
 * Both trees run rollout-overhead.mjs's distinct-conversations cell (n = 1 over 1,024 GSM8K questions, each run's new
 * to its tree, distinct turns and tool answers from the fake's 7,473 GSM8K-derived texts, concurrency 256, strict drift
 * check, parquet, reward)
 * against the same fake SGLang server (its own process), taking turns: base, this, this, base, … so that each pair
 * shares the machine's state. Each tree keeps its own tokenizer, template and caches for the whole run, warmed first.
 * Reported: each tree's median CPU per turn, and the median over pairs of this tree's CPU over base's (with the
 * pairs' range). process.cpuUsage() counts every thread of the process, both trees' only while they run.
 *
 *   npm run build && (cd BASE && npm run build) && node bench/client-ab.mjs --base BASE [--pairs 8] [--json]
 *
 * BASE is another checkout with node_modules and dist/ (e.g. `git worktree add ../base HEAD~1`, then build there).
 */
import "./lib/relaunch-as-cli.mjs";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { playDistinctCell } from "./lib/distinct-cell.mjs";
import { startFakeSglangProcess } from "./lib/fake-sglang-process.mjs";
import { median } from "./lib/table-format.mjs";

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};
const baseDir = flag("base", undefined);
const pairs = Number(flag("pairs", "8"));
if (!baseDir || !(pairs > 0)) {
  console.error("usage: client-ab.mjs --base DIR [--pairs N] [--json]");
  process.exit(2);
}
const CONCURRENCY = 256;
const TRAJECTORIES = 1024;

/** One tree's runRollout and workload, loaded from its own dist/ and bench/lib. */
async function loadTree(dir) {
  const lib = await import(pathToFileURL(path.resolve(dir, "bench/lib/gsm8k-tool-workload.mjs")).href);
  const { runRollout } = await lib.loadDist("rollout/run-rollout.js");
  const { makeClient } = await lib.loadDist("rollout/setup.js");
  const { openTrajectoryWriter } = await lib.loadDist("data/trajectory-store.js");
  return { dir, lib, runRollout, makeClient, openTrajectoryWriter };
}

const outDir = mkdtempSync(path.join(os.tmpdir(), "agentrl-bench-ab-"));
let files = 0;

/** One distinct-conversations run of `tree`: its CPU per turn (µs). */
async function run(tree, url, trajectories = TRAJECTORIES) {
  const cpu0 = process.cpuUsage();
  const turns = await playDistinctCell(tree, url, path.join(outDir, `run-${files++}.parquet`), { concurrency: CONCURRENCY, trajectories });
  const cpu = process.cpuUsage(cpu0);
  return (cpu.user + cpu.system) / turns;
}

const started = performance.now();
const base = await loadTree(baseDir);
const head = await loadTree(".");
const fake = await startFakeSglangProcess(head.lib.root, { ...head.lib.story, ...head.lib.distinctTurns() });
const perTree = { base: [], head: [] };
const ratios = [];
try {
  // Warm both: the JIT, the sockets, and each tree's word memo over the same questions the runs then ask.
  for (const tree of [base, head]) for (let i = 0; i < 3; i++) await run(tree, fake.url);
  for (let pair = 0; pair < pairs; pair++) {
    const order = pair % 2 === 0 ? [base, head] : [head, base];
    const got = new Map();
    for (const tree of order) got.set(tree, await run(tree, fake.url));
    perTree.base.push(got.get(base));
    perTree.head.push(got.get(head));
    ratios.push(got.get(head) / got.get(base));
    process.stderr.write(`client-ab: pair ${pair + 1}/${pairs}: base ${got.get(base).toFixed(0)} µs, this ${got.get(head).toFixed(0)} µs per turn\n`);
  }
} finally {
  await fake.stop();
  await base.lib.parts.close();
  await head.lib.parts.close();
  rmSync(outDir, { recursive: true, force: true });
}

const result = {
  base: path.resolve(baseDir),
  pairs,
  baseCpuPerTurnUs: median(perTree.base),
  headCpuPerTurnUs: median(perTree.head),
  ratio: median(ratios),
  ratioRange: [Math.min(...ratios), Math.max(...ratios)],
  seconds: (performance.now() - started) / 1000,
};
if (args.includes("--json")) {
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
} else {
  process.stdout.write(
    `Distinct conversations (concurrency ${CONCURRENCY}, ${TRAJECTORIES} trajectories a run, ${pairs} pairs): ` +
      `base ${result.baseCpuPerTurnUs.toFixed(0)} µs, this tree ${result.headCpuPerTurnUs.toFixed(0)} µs CPU per turn (medians); ` +
      `**this/base ${result.ratio.toFixed(3)}** (pairs ${result.ratioRange[0].toFixed(3)}–${result.ratioRange[1].toFixed(3)}); ` +
      `${result.seconds.toFixed(0)} s.\n`,
  );
}
