#!/usr/bin/env node
/**
 * Over-sampling with early abort, measured on the real client: the whole runRollout (run-rollout.ts, the
 * over_sample_rate path included) against the fake SGLang server in a child process, where every generation waits a
 * lognormal time fixed by its sampling seed, so each schedule replays the same latencies. Side by side in one run:
 * over_sample_rate 0 (wait for the whole batch) against 0.05, 0.1 and 0.25. The simulation in long-tail.mjs adds a
 * decode-capacity model; this one checks the real code path and its abort cost. Prints one markdown section.
 *
 *   npx tsc -p tsconfig.json && node bench/over-sample.mjs
 */
import { startFakeSglangProcess } from "./lib/fake-sglang-process.mjs";
import { contextFor, gsm8kPrompts, loadDist, root, story, toolRollout } from "./lib/gsm8k-tool-workload.mjs";

const { runRollout } = await loadDist("rollout/run-rollout.js");
const { makeClient } = await loadDist("rollout/setup.js");

const quick = process.env.BENCH_QUICK === "1";
const N_PER_PROMPT = 4;
const PROMPTS = 64;
const TRAJECTORIES = PROMPTS * N_PER_PROMPT;
const LATENCY = { medianMs: 100, sigma: 1.0 };
const RATES = [0, 0.05, 0.1, 0.25];
const SEEDS = quick ? [1, 2] : [1, 2, 3, 4, 5];

async function run(url, rate, seed) {
  const rollout = toolRollout(TRAJECTORIES, { n: N_PER_PROMPT, seed, over_sample_rate: rate });
  rollout.server.urls = [url];
  const client = makeClient(rollout, undefined);
  const kept = [];
  const t0 = performance.now();
  let result;
  try {
    result = await runRollout({
      prompts: gsm8kPrompts(PROMPTS),
      n: N_PER_PROMPT,
      concurrency: TRAJECTORIES,
      context: contextFor(client, rollout),
      overSample: { rate, total: TRAJECTORIES },
    });
  } finally {
    await client.close();
  }
  const wallMs = performance.now() - t0;
  for (const t of result.trajectories) if (t.finish_reason !== "over_sample") kept.push(t);
  const bad = kept.filter((t) => t.status !== "completed").length;
  if (bad > 0) throw new Error(`${bad} trajectories did not complete the scripted story`);
  const all = result.trajectories;
  return {
    wallMs,
    aborted: result.overSampleAborted,
    kept: kept.length,
    // Time spent generating, kept trajectories against the whole batch: what early abort selects for.
    genBias: mean(kept.map((t) => t.gen_ms)) / mean(all.map((t) => t.gen_ms)),
  };
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const started = performance.now();
const fake = await startFakeSglangProcess(root, { ...story, latency: LATENCY });
const cells = new Map(RATES.map((r) => [r, []]));
try {
  await run(fake.url, 0, 99); // warm-up: JIT, tokenizer, sockets
  for (const seed of SEEDS) for (const rate of RATES) cells.get(rate).push(await run(fake.url, rate, seed));
} finally {
  await fake.stop();
}

const base = cells.get(0);
const lines = RATES.map((rate) => {
  const rows = cells.get(rate);
  const speedup = rows.map((r, i) => base[i].wallMs / r.wallMs);
  return (
    `| ${rate} | ${(median(rows.map((r) => r.wallMs)) / 1000).toFixed(2)} s | ${median(speedup).toFixed(2)} ` +
    `(${Math.min(...speedup).toFixed(2)}–${Math.max(...speedup).toFixed(2)}) | ${median(rows.map((r) => r.kept))} | ` +
    `${median(rows.map((r) => r.aborted))} | ${median(rows.map((r) => r.genBias)).toFixed(2)} |`
  );
});
console.log(`## Over-sampling with early abort (real client, simulated latencies)

\`runRollout\` with \`over_sample_rate\` r against the fake SGLang server in a child process: ${TRAJECTORIES} trajectories
(${PROMPTS} GSM8K prompts × n = ${N_PER_PROMPT}) all in flight, each playing the two-turn tool story of
rollout-overhead.mjs; every generation waits lognormal(median ${LATENCY.medianMs} ms, σ ${LATENCY.sigma}) drawn from its
sampling seed, so every rate replays the same latencies. The server has no decode-capacity limit here (long-tail.mjs
models that). Medians over ${SEEDS.length} seeds; speed-up is wall(r = 0) / wall(r) on the same seed (min–max).

| over_sample_rate | wall | speed-up vs r = 0 | kept | aborted (over_sample) | kept gen time / all |
|---|---|---|---|---|---|
${lines.join("\n")}

The kept set is the fast part of the batch (last column below 1): over-sampling trades the slowest trajectories, and
with them a bias towards short, easy episodes, for the batch's tail. The aborted ones are recorded, never trained on.`);
process.stderr.write(`over-sample: ${((performance.now() - started) / 1000).toFixed(1)} s real time\n`);
