#!/usr/bin/env node
/**
 * GRPO on the CPU demo, agentrl against TRL's GRPOTrainer, side by side (issue 29, item 3): per seed, the steps to
 * greedy accuracy ≥ 0.9 and ≥ 0.95 on the 100 test vaults, the sampled reward, and the median seconds per step, and
 * the ratio TRL/agentrl of the median step, all measured in one run. Prints a markdown table (docs/benchmarks.md,
 * "GRPO step and sample efficiency against TRL").
 *
 *   .venv/bin/python -m pip install --retries 0 trl          # bench-only dependency (TRL 1.13 measured)
 *   node bin/agentrl.js sft --config examples/cpu-demo-sft.yaml --force   # the warm start, if runs/cpu-demo-sft/model is absent
 *   node bench/trl-vs-agentrl.mjs                            # seeds 0-4, 30 steps each, validation every 5 steps
 *   node bench/trl-vs-agentrl.mjs --seeds 0,1 --steps 30 --json
 *   BENCH_QUICK=1 node bench/trl-vs-agentrl.mjs              # smoke run: seed 0, 2 steps, validation every step
 *
 * agentrl: `node bin/agentrl.js train --config examples/cpu-demo.yaml` with every seed the config has set to S
 * (data.seed, trainer.seed, actor_rollout_ref.rollout.seed), trainer.test_freq, the step count and a run folder
 * under runs/trl-bench/. TRL: bench/lib/trl_demo.py (same model, template, data, tool, reward and hyperparameters; its
 * docstring lists what maps to what). A step is one batch of 16 prompts × 8 rollouts and its 4 optimizer steps in
 * both; its seconds exclude validation (agentrl's timing_s/step; trl_demo.py times the same window).
 *
 * Both start from a copy of runs/cpu-demo-sft/model taken once (runs/trl-bench/warm-start; delete it to take a new
 * one), so that a concurrent SFT run cannot change the warm start under the bench. Runs alternate to spread the
 * machine's load over both systems: seed 0 agentrl then TRL, seed 1 TRL then agentrl, and so on. Each run's CPU
 * seconds (user + system of its whole process tree, from /usr/bin/time: on a shared machine the load-independent
 * measure) and its load average (1 min) at its start and end go in the table and the JSON.
 *
 * Options: --seeds 0,1,2 | --steps N | --test-freq K | --json (raw per-step numbers) | --systems agentrl,trl |
 * --agentrl-set key=value (repeatable, extra --set for agentrl) | --trl-arg ARG (repeatable, extra trl_demo.py
 * argument, e.g. --trl-arg=--no-shuffle) | --label TEXT (names the variant in the table) | --out DIR (default
 * runs/trl-bench) | --from FILE (print the table of an earlier --json output, running nothing).
 */
import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { median } from "./lib/table-format.mjs";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const PYTHON = path.join(REPO, ".venv/bin/python");

function parseArgs(argv) {
  const quick = process.env.BENCH_QUICK === "1";
  const opts = {
    seeds: quick ? [0] : [0, 1, 2, 3, 4],
    steps: quick ? 2 : 30,
    testFreq: quick ? 1 : 5,
    json: false,
    systems: ["agentrl", "trl"],
    agentrlSet: [],
    trlArgs: [],
    label: "",
    out: path.join(REPO, "runs/trl-bench"),
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].includes("=") && argv[i].startsWith("--") ? [argv[i].slice(0, argv[i].indexOf("=")), argv[i].slice(argv[i].indexOf("=") + 1)] : [argv[i], undefined];
    const value = () => inline ?? argv[++i];
    if (flag === "--seeds") opts.seeds = value().split(",").map(Number);
    else if (flag === "--steps") opts.steps = Number(value());
    else if (flag === "--test-freq") opts.testFreq = Number(value());
    else if (flag === "--json") opts.json = true;
    else if (flag === "--systems") opts.systems = value().split(",");
    else if (flag === "--agentrl-set") opts.agentrlSet.push(value());
    else if (flag === "--trl-arg") opts.trlArgs.push(value());
    else if (flag === "--label") opts.label = value();
    else if (flag === "--out") opts.out = path.resolve(value());
    else if (flag === "--from") opts.from = path.resolve(value());
    else {
      console.error(`unknown option ${argv[i]} (see the comment at the top of bench/trl-vs-agentrl.mjs)`);
      process.exit(2);
    }
  }
  if (opts.seeds.some((s) => !Number.isInteger(s)) || !(opts.steps > 0) || !(opts.testFreq > 0)) {
    console.error("--seeds takes integers, --steps and --test-freq positive numbers");
    process.exit(2);
  }
  return opts;
}

const TIME = "/usr/bin/time";

/**
 * Runs a command to completion; resolves with the CPU seconds (user + system) of its whole process tree, from
 * /usr/bin/time (children's times are added up as they are reaped), or null where there is no /usr/bin/time. Unlike
 * wall time, this does not grow with the load other processes put on the machine.
 */
function run(cmd, args, { logFile, env } = {}) {
  const timeFile = existsSync(TIME) ? path.join(tmpdir(), `trl-vs-agentrl-${process.pid}-${Date.now()}.time`) : null;
  if (timeFile) [cmd, args] = [TIME, ["-f", "%U %S", "-o", timeFile, cmd, ...args]];
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: REPO, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let tail = "";
    const keep = (chunk) => {
      tail = (tail + chunk).slice(-4000);
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    child.on("error", reject);
    const cpu = () => {
      if (!timeFile || !existsSync(timeFile)) return null;
      const [user, sys] = readFileSync(timeFile, "utf8").trim().split(/\s+/).slice(-2).map(Number);
      rmSync(timeFile, { force: true });
      return user + sys;
    };
    child.on("close", (code) => (code === 0 ? resolve(cpu()) : reject(new Error(`${cmd} ${args.join(" ")} exited ${code}${logFile ? ` (${logFile})` : ""}\n${tail}`))));
  });
}

const HEADING = "## GRPO step and sample efficiency against TRL (bench/trl-vs-agentrl.mjs)";

const readJsonLines = (file) =>
  readFileSync(file, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));

async function warmStart(out) {
  const copy = path.join(out, "warm-start");
  if (existsSync(path.join(copy, "model.safetensors"))) return copy;
  const source = path.join(REPO, "runs/cpu-demo-sft/model");
  if (!existsSync(path.join(source, "model.safetensors"))) {
    process.stderr.write("no runs/cpu-demo-sft/model: running the SFT warm start (about 2 minutes)\n");
    await run("node", ["bin/agentrl.js", "sft", "--config", "examples/cpu-demo-sft.yaml", "--force", "-q"]);
  }
  mkdirSync(out, { recursive: true });
  cpSync(source, copy, { recursive: true });
  return copy;
}

/** One agentrl run: per-step records { step, seconds, reward, val_acc } from its metrics.jsonl. */
async function runAgentrl(opts, model, seed) {
  const dir = path.join(opts.out, `agentrl-s${seed}${opts.label ? `-${opts.label}` : ""}`);
  const sets = [
    `actor_rollout_ref.model.path=${model}`,
    `trainer.default_local_dir=${dir}`,
    `trainer.total_training_steps=${opts.steps}`,
    `trainer.test_freq=${opts.testFreq}`,
    `trainer.seed=${seed}`,
    `actor_rollout_ref.rollout.seed=${seed}`,
    `data.seed=${seed}`,
    ...opts.agentrlSet,
  ];
  const cpuSeconds = await run("node", ["bin/agentrl.js", "train", "--config", "examples/cpu-demo.yaml", "--force", "-q", ...sets.flatMap((s) => ["--set", s])]);
  const records = readJsonLines(path.join(dir, "metrics.jsonl")).map((m) => ({
    step: m.step,
    seconds: m["timing_s/step"],
    reward: m["acc/mean"],
    val_acc: m["val-core/agentrl/vault/acc/mean@1"],
  }));
  return { records, cpuSeconds };
}

/** One TRL run of bench/lib/trl_demo.py: its JSON lines. */
async function runTrl(opts, model, seed) {
  const file = path.join(opts.out, `trl-s${seed}${opts.label ? `-${opts.label}` : ""}.jsonl`);
  rmSync(file, { force: true });
  const args = ["bench/lib/trl_demo.py", "--model", model, "--seed", String(seed), "--steps", String(opts.steps), "--test-freq", String(opts.testFreq), "--out", file, ...opts.trlArgs];
  const cpuSeconds = await run(PYTHON, args);
  const records = readJsonLines(file).map((r) => ({ step: r.step, seconds: r.seconds, reward: r.reward, val_acc: r.val_acc, prompts: r.prompts }));
  return { records, cpuSeconds };
}

/** The first validated step with greedy accuracy ≥ bar, or null. */
const stepsTo = (records, bar) => records.find((r) => r.val_acc != null && r.val_acc >= bar)?.step ?? null;
const mean = (xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

function summarise(system, seed, { records, cpuSeconds }, wall, load) {
  const steps = records.filter((r) => r.step > 0 && r.seconds != null);
  const vals = records.filter((r) => r.val_acc != null);
  const rewardOver = (lo, hi) => mean(steps.filter((r) => r.step >= lo && r.step <= hi).map((r) => r.reward));
  return {
    system,
    seed,
    to90: stepsTo(records, 0.9),
    to95: stepsTo(records, 0.95),
    greedy: Object.fromEntries(vals.map((r) => [r.step, r.val_acc])),
    medianStep: median(steps.map((r) => r.seconds)),
    meanStep: mean(steps.map((r) => r.seconds)),
    reward1to10: rewardOver(1, 10),
    rewardLast10: rewardOver(Math.max(1, steps.length - 9), steps.length),
    wallSeconds: wall,
    cpuSeconds,
    load,
    records,
  };
}

const cell = (x, d = 2) => (x == null || Number.isNaN(x) ? "—" : typeof x === "number" ? x.toFixed(d) : String(x));

function table(opts, results) {
  const lines = [];
  const lastStep = opts.steps;
  lines.push(`| seed | system | greedy at steps 0, ${opts.testFreq}, ${2 * opts.testFreq}, … | steps to ≥ 0.9 | steps to ≥ 0.95 | sampled reward, steps 1–10 | last 10 | median s/step | run: wall s / CPU s | load (1 min) |`);
  lines.push("|---|---|---|---|---|---|---|---|---|---|");
  for (const r of results) {
    const curve = Object.entries(r.greedy).sort(([a], [b]) => Number(a) - Number(b)).map(([, v]) => cell(v)).join(" ");
    lines.push(
      `| ${r.seed} | ${r.system}${opts.label ? ` (${opts.label})` : ""} | ${curve} | ${r.to90 ?? `> ${lastStep}`} | ${r.to95 ?? `> ${lastStep}`} | ${cell(r.reward1to10)} | ${cell(r.rewardLast10)} | ${cell(r.medianStep, 3)} | ${cell(r.wallSeconds, 0)} / ${cell(r.cpuSeconds, 0)} | ${cell(r.load[0], 1)}–${cell(r.load[1], 1)} |`,
    );
  }
  const bySystem = (s) => results.filter((r) => r.system === s);
  const agentrl = bySystem("agentrl");
  const trl = bySystem("trl");
  if (agentrl.length && trl.length) {
    const ratios = opts.seeds
      .map((seed) => [agentrl.find((r) => r.seed === seed), trl.find((r) => r.seed === seed)])
      .filter(([a, t]) => a && t)
      .map(([a, t]) => t.medianStep / a.medianStep);
    const pooled = (rs) => median(rs.flatMap((r) => r.records.filter((x) => x.step > 0 && x.seconds != null).map((x) => x.seconds)));
    const medTo = (rs, key) => {
      const xs = rs.map((r) => r[key] ?? Infinity);
      const m = median(xs);
      return Number.isFinite(m) ? String(m) : `> ${lastStep}`;
    };
    lines.push("");
    lines.push(
      `Median step over all steps of all seeds: agentrl ${pooled(agentrl).toFixed(3)} s, TRL ${pooled(trl).toFixed(3)} s; ` +
        `TRL/agentrl ${(pooled(trl) / pooled(agentrl)).toFixed(2)}× (per seed: ${ratios.map((x) => x.toFixed(2)).join(", ")}). ` +
        `Median steps to ≥ 0.9: agentrl ${medTo(agentrl, "to90")}, TRL ${medTo(trl, "to90")}; to ≥ 0.95: agentrl ${medTo(agentrl, "to95")}, TRL ${medTo(trl, "to95")} ` +
        `(validation every ${opts.testFreq} steps).`,
    );
  }
  return lines.join("\n");
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (opts.from) {
    // The table of an earlier --json run, without running anything.
    const saved = JSON.parse(readFileSync(opts.from, "utf8"));
    Object.assign(opts, { steps: saved.steps, testFreq: saved.testFreq, label: saved.label, agentrlSet: saved.agentrlSet, trlArgs: saved.trlArgs });
    opts.seeds = [...new Set(saved.results.map((r) => r.seed))];
    printTable(opts, saved.results);
    return;
  }
  if (opts.systems.includes("trl") && spawnSync(PYTHON, ["-c", "import trl"], { stdio: "ignore" }).status !== 0) {
    // `npm run bench` runs every script: say why there is no table rather than fail.
    console.log(`${HEADING}\n\nskipped: TRL is not installed (\`.venv/bin/python -m pip install --retries 0 trl\`).`);
    return;
  }
  mkdirSync(opts.out, { recursive: true });
  const model = await warmStart(opts.out);
  const results = [];
  for (const [i, seed] of opts.seeds.entries()) {
    const order = i % 2 === 0 ? opts.systems : [...opts.systems].reverse();
    for (const system of order) {
      const load0 = loadavg()[0];
      const t0 = performance.now();
      process.stderr.write(`seed ${seed}: ${system} ... `);
      const ran = system === "agentrl" ? await runAgentrl(opts, model, seed) : await runTrl(opts, model, seed);
      const wall = (performance.now() - t0) / 1000;
      const summary = summarise(system, seed, ran, wall, [load0, loadavg()[0]]);
      process.stderr.write(`${wall.toFixed(0)} s, median step ${summary.medianStep.toFixed(3)} s, to 0.9 at ${summary.to90 ?? "—"}\n`);
      results.push(summary);
    }
  }
  results.sort((a, b) => a.seed - b.seed || a.system.localeCompare(b.system));
  if (opts.json) {
    console.log(JSON.stringify({ steps: opts.steps, testFreq: opts.testFreq, label: opts.label, agentrlSet: opts.agentrlSet, trlArgs: opts.trlArgs, results }, null, 1));
  } else {
    printTable(opts, results);
  }
}

function printTable(opts, results) {
  const what =
    `The CPU demo's GRPO stage (examples/cpu-demo.yaml from the SFT warm start) in agentrl and in TRL's GRPOTrainer ` +
    `(bench/lib/trl_demo.py), ${opts.steps} steps of 16 prompts × 8 rollouts and 4 optimizer steps, greedy accuracy on ` +
    `the 100 test vaults every ${opts.testFreq} steps; seconds per step exclude validation.` +
    (opts.agentrlSet.length || opts.trlArgs.length ? ` Variant: agentrl ${opts.agentrlSet.join(" ") || "as configured"}; TRL ${opts.trlArgs.join(" ") || "as configured"}.` : "");
  console.log(`${HEADING}\n\n${what}\n\n${table(opts, results)}`);
}

main().catch((err) => {
  console.error(err.message ?? err);
  process.exit(1);
});
