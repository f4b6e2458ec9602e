/**
 * Pieces shared by the end-to-end tests of `agentrl train` on the CPU demo (train-demo, train-faults): reading a run
 * folder back (metrics, state, rollouts), starting the CLI as a child the test can signal, and finding the processes
 * a run started (engine, worker ranks, torchrun where it runs several) through /proc, to kill one of them or to check none is left.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { CLI, REPO_ROOT } from "./cli.js";
import { readTrajectories } from "../../src/data/trajectory-store.js";
import type { Trajectory } from "../../src/data/trajectory.js";

/** The demo's GRPO stage from the random-init model (no SFT run needed): the loop's mechanics, not learning. */
export const DEMO_CONFIG = path.join(REPO_ROOT, "test", "fixtures", "cpu-demo-from-scratch.yaml");

export type Metrics = Record<string, number>;

/** `agentrl train` on the demo into `runDir` for 2 steps without validation, with `flags` and each `--set key=value`. */
export function demoTwoSteps(runDir: string, flags: string[], sets: Record<string, string | number>): string[] {
  const base = { "trainer.default_local_dir": runDir, "trainer.total_training_steps": 2, "trainer.test_freq": -1, ...sets };
  return ["train", "--config", DEMO_CONFIG, ...flags, ...Object.entries(base).flatMap(([key, value]) => ["--set", `${key}=${value}`])];
}

export const pad6 = (step: number): string => String(step).padStart(6, "0");

/** Every line of the run's metrics.jsonl, parsed. */
export function readMetrics(runDir: string): Metrics[] {
  return readFileSync(path.join(runDir, "metrics.jsonl"), "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Metrics);
}

/**
 * A run's metrics without what the wall clock decides (timing_s/*, time, throughput, idle ratios): what two runs with
 * the same seeds must share line for line (issue 29, item 6).
 */
export function seededMetrics(metrics: readonly Metrics[]): Metrics[] {
  const clock = (key: string) => key.startsWith("timing_s/") || key === "time" || key === "perf/throughput" || key.endsWith("/idle_ratio");
  return metrics.map((line) => Object.fromEntries(Object.entries(line).filter(([key]) => !clock(key))));
}

export async function readStep(runDir: string, step: number): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for await (const t of readTrajectories(path.join(runDir, "rollouts", `step-${pad6(step)}.parquet`))) out.push(t);
  return out;
}

/** The prompts a step used, as the sorted multiset of data_index (the order of finishing is not part of it). */
export async function dataOrder(runDir: string, steps: number): Promise<number[][]> {
  const order: number[][] = [];
  for (let step = 1; step <= steps; step++) order.push((await readStep(runDir, step)).map((t) => t.data_index).sort((a, b) => a - b));
  return order;
}

/** The step of the run's state.json (its last checkpoint), 0 when there is none yet. */
export function stateStep(runDir: string): number {
  try {
    return (JSON.parse(readFileSync(path.join(runDir, "state.json"), "utf8")) as { step: number }).step;
  } catch {
    return 0; // not written yet, or being replaced
  }
}

/** One line of `agentrl train --json` output. */
export interface TrainEvent {
  event: string;
  step?: number;
  message?: string;
  [key: string]: unknown;
}

/** `agentrl train` running as a child process, its output collected as it comes. */
export interface TrainChild {
  child: ChildProcess;
  pid: number;
  stdout(): string;
  stderr(): string;
  /** The JSON events printed so far (needs --json). */
  events(): TrainEvent[];
  /** The step events printed so far, as step numbers. */
  steps(): number[];
  running(): boolean;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `agentrl <args>`; `env` is added to the test's environment (NO_COLOR is set). */
export function startCli(args: string[], env: NodeJS.ProcessEnv = {}): TrainChild {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  let running = true;
  child.stdout!.on("data", (chunk) => (stdout += chunk));
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => {
      running = false;
      resolve({ code, signal });
    });
  });
  const events = (): TrainEvent[] =>
    stdout
      .split("\n")
      .filter((line) => line.startsWith("{") && line.endsWith("}"))
      .map((line) => JSON.parse(line) as TrainEvent);
  return {
    child,
    pid: child.pid!,
    stdout: () => stdout,
    stderr: () => stderr,
    events,
    steps: () => events().filter((e) => e.event === "step").map((e) => e.step!),
    running: () => running,
    exited,
  };
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `condition` every `everyMs` until it holds (true) or `timeoutMs` passes (false). Stops early, with false, once
 * `alive` says the process it waits on has gone.
 */
export async function pollUntil(
  condition: () => boolean,
  options: { timeoutMs: number; everyMs?: number; alive?: () => boolean },
): Promise<boolean> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    if (condition()) return true;
    if (Date.now() > deadline || (options.alive && !options.alive())) return condition();
    await sleep(options.everyMs ?? 20);
  }
}

/** A process as /proc shows it. */
export interface ProcessInfo {
  pid: number;
  ppid: number;
  /** R, S, D, Z (zombie), ... */
  state: string;
  args: string;
}

function readProcess(pid: number): ProcessInfo | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name, in parentheses, may hold spaces and parentheses itself: the fields follow the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
    return { pid, ppid: Number(fields[1]), state: fields[0]!, args };
  } catch {
    return undefined; // gone meanwhile
  }
}

/** Every live descendant of `root` (children, their children, ...), whatever process group or session it leads. */
export function descendants(root: number): ProcessInfo[] {
  const all = readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map((name) => readProcess(Number(name)))
    .filter((p): p is ProcessInfo => p !== undefined);
  const out: ProcessInfo[] = [];
  const parents = new Set([root]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of all) {
      if (parents.has(p.ppid) && !parents.has(p.pid)) {
        parents.add(p.pid);
        out.push(p);
        grew = true;
      }
    }
  }
  return out.filter((p) => p.state !== "Z");
}

/** Whether `pid` still runs (a zombie waiting to be reaped does not). */
export function isRunning(pid: number): boolean {
  const p = readProcess(pid);
  return p !== undefined && p.state !== "Z" && p.state !== "X";
}

/**
 * What a train run started: the embedded engine (and its guardian), and the worker: its ranks, under torchrun when it
 * runs several (`torchrun` is undefined for the one rank the CLI starts alone).
 */
export interface TrainProcesses {
  all: ProcessInfo[];
  torchrun: ProcessInfo | undefined;
  ranks: ProcessInfo[];
  engine: ProcessInfo | undefined;
}

export function trainProcesses(cliPid: number): TrainProcesses {
  const all = descendants(cliPid);
  const python = (p: ProcessInfo) => /python/.test(p.args.split(" ")[0]!);
  return {
    all,
    torchrun: all.find((p) => p.args.includes("torch.distributed.run")),
    ranks: all.filter((p) => python(p) && /-m agentrl_worker( |$)/.test(p.args)),
    engine: all.find((p) => python(p) && p.args.includes("-m agentrl_worker.embedded_server")),
  };
}
