#!/usr/bin/env node
/**
 * Agent launch: the CLI's own CPU per command agent (`{kind: openai, command: [...]}`), node's child_process.spawn
 * from the CLI against the agent launcher (src/gateway/agent-launcher.ts, agentrl_worker.agent_launcher), at a small
 * RSS and at the size of a rollout's CLI (~400 MB: a touched ballast buffer), in one process.
 *
 * `spawn` is what the CLI did before the launcher: spawn detached with three pipes, the row written to stdin, both
 * outputs read, the close awaited, the process group killed. `launcher` is runAgentProcess as the gateway calls it.
 * The agent is /bin/true (its own CPU is not the question), 16 at a time; after a warm-up, the CPU of this process
 * (process.cpuUsage: every thread) and its minor page faults over `--agents` runs, per agent, medians over rounds;
 * beside them the launcher's own CPU per agent (/proc/PID/stat), which the CLI no longer pays.
 *
 *   npm run build && node bench/agent-launch.mjs [--agents 600] [--rounds 3] [--ballast-mb 340]
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { cpus } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return Number(i >= 0 ? args[i + 1] : fallback);
};
const quick = process.env.BENCH_QUICK === "1";
const agents = flag("agents", quick ? 200 : 600);
const rounds = flag("rounds", quick ? 1 : 3);
const ballastMb = flag("ballast-mb", 340);
const CONCURRENCY = 16;
const load = (rel) => import(pathToFileURL(path.join(root, "dist", rel)).href);
const { runAgentProcess } = await load("gateway/agent-process.js");
const { AgentLauncher } = await load("gateway/agent-launcher.js");
const { killGroup } = await load("process/index.js");

const env = { ...process.env };
const row = JSON.stringify({ messages: [{ role: "user", content: "What is 2 + 2? ".repeat(100) }] });
const ARGV = ["/bin/true"];

/** The CLI's old path: one child of its own, its group killed once it has closed. */
function direct() {
  return new Promise((resolve, reject) => {
    const child = spawn(ARGV[0], ARGV.slice(1), { cwd: "/", env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
    child.stdout.on("data", () => undefined);
    child.stderr.on("data", () => undefined);
    child.stdin.on("error", () => undefined);
    child.stdin.end(row);
    child.on("error", reject);
    child.on("close", (code) => {
      killGroup(child.pid);
      code === 0 ? resolve() : reject(new Error(`exit code ${code}`));
    });
  });
}

const launcher = new AgentLauncher();
await launcher.start("bench");
async function launched() {
  const outcome = await runAgentProcess({ launcher, argv: ARGV, env, cwd: "/", input: row, signal: new AbortController().signal });
  if (!outcome.ok) throw new Error(outcome.error);
}

/** The launcher: this process's child running agentrl_worker.agent_launcher. */
const launcherPid = readdirSync("/proc").map(Number).find((pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === process.pid && readFileSync(`/proc/${pid}/cmdline`, "latin1").includes("agent_launcher");
  } catch {
    return false;
  }
});
const CLOCK_TICK_US = 10_000; // USER_HZ is 100 on Linux
function launcherCpuUs() {
  const stat = readFileSync(`/proc/${launcherPid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) * CLOCK_TICK_US;
}

async function batch(runOne, count) {
  let next = 0;
  const worker = async () => {
    while (next++ < count) await runOne();
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

/** Per agent: this process's CPU (and its kernel part), minor faults, wall, the launcher's CPU. */
async function measure(runOne) {
  await batch(runOne, Math.min(200, agents));
  const cpu = process.cpuUsage();
  const faults = process.resourceUsage().minorPageFault;
  const helper = launcherCpuUs();
  const started = performance.now();
  await batch(runOne, agents);
  const used = process.cpuUsage(cpu);
  return {
    cpuUs: (used.user + used.system) / agents,
    systemUs: used.system / agents,
    faults: (process.resourceUsage().minorPageFault - faults) / agents,
    wallUs: ((performance.now() - started) * 1000) / agents,
    launcherUs: (launcherCpuUs() - helper) / agents,
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results = [];
let ballast;
for (const size of [0, ballastMb]) {
  if (size > 0) ballast = Buffer.alloc(size * 1024 * 1024, 1); // touched: its pages are mapped, as a CLI's heap is
  const rss = process.memoryUsage().rss / 2 ** 20;
  for (const [name, runOne] of [["spawn", direct], ["launcher", launched]]) {
    const runs = [];
    for (let round = 0; round < rounds; round++) runs.push(await measure(runOne));
    const pick = (key) => median(runs.map((r) => r[key]));
    results.push({ rss, name, cpuUs: pick("cpuUs"), systemUs: pick("systemUs"), faults: pick("faults"), wallUs: pick("wallUs"), launcherUs: name === "launcher" ? pick("launcherUs") : undefined });
    process.stderr.write(`agent-launch: ${rss.toFixed(0)} MB ${name}: ${pick("cpuUs").toFixed(0)} µs CPU per agent\n`);
  }
}
await launcher.close();
void ballast;

const out = [];
out.push("## Agent launch: the CLI's CPU per command agent, node's spawn vs the agent launcher");
out.push("");
out.push(
  `One Node process runs ${agents} agents (/bin/true, the row of a trajectory on stdin), ${CONCURRENCY} at a time, after a ` +
    "warm-up: **spawn** as the CLI did before the agent launcher (child_process.spawn, detached, three pipes, the " +
    "process group killed at close), **launcher** through runAgentProcess and `agentrl_worker.agent_launcher` (its " +
    "os.posix_spawn is a vfork), first at this process's own size, then with a touched ballast buffer that brings it " +
    "to a rollout CLI's size. CPU is this process's (every thread; the agents' and the launcher's are not in it), per " +
    `agent, median of ${rounds} round(s); \`launcher CPU\` is the launcher process's own, per agent. ` +
    `${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, shared.`,
);
out.push("");
out.push("| RSS | path | CPU per agent | of which system | minor faults per agent | wall per agent (16 at a time) | launcher CPU per agent (not in the CLI) |");
out.push("|---|---|---|---|---|---|---|");
for (const r of results) {
  out.push(
    `| ${r.rss.toFixed(0)} MB | ${r.name} | ${r.cpuUs.toFixed(0)} µs | ${r.systemUs.toFixed(0)} µs | ${r.faults.toFixed(0)} | ${r.wallUs.toFixed(0)} µs | ` +
      `${r.launcherUs === undefined ? "-" : `${r.launcherUs.toFixed(0)} µs`} |`,
  );
}
out.push("");
out.push(`Measured with \`node bench/agent-launch.mjs${args.length ? ` ${args.join(" ")}` : ""}\` (after \`npm run build\`) on ${new Date().toISOString().slice(0, 10)}, node ${process.version}.`);
process.stdout.write(`${out.join("\n")}\n`);
