/**
 * The one supervisor of the long-running children agentrl owns: the training worker (torchrun and its ranks) and the
 * inference servers of `agentrl serve` (the embedded server, SGLang, the SGLang router).
 *
 * - **Start.** The child runs in its own process group, so one signal reaches it and everything it forks.
 * - **Readiness.** The caller's probe says when the child is ready (a socket connection for the worker, `/health` for
 *   a server). Start-up fails with the caller's error class, carrying the child's last lines, when the child exits
 *   first, the probe does not answer in time, the probe throws a StartupFailure, or the caller aborts.
 * - **Output.** Lines for the caller, everything in an optional log file, the last lines for error messages.
 * - **Stop.** A signal to the group, SIGKILL after the grace period.
 * - **No orphans.** A normal exit of agentrl (process.exit included) signals every group still running. For a SIGKILL
 *   of agentrl, which runs no handler, a child either runs behind the guardian (guardian.ts), which sees agentrl's death
 *   through a pipe, or watches agentrl's pid itself (the worker's `--parent-pid`).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { GUARDIAN_SOURCE } from "./guardian.js";
import { ChildOutput } from "./output.js";

/** How long agentrl waits past the grace period before it kills a guarded group itself (a stuck guardian). */
const GUARDIAN_SLACK_MS = 2_000;
/** How long after the group leader's exit its pipes may stay open (a straggler holds them) before `exited` settles. */
const PIPE_DRAIN_MS = 2_000;

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** True when agentrl asked it to stop. */
  requested: boolean;
}

/** Thrown by a readiness probe to fail start-up; the supervisor stops the child and throws the caller's error. */
export class StartupFailure extends Error {
  constructor(
    message: string,
    readonly hint?: string,
    /** The caller aborted the start (Ctrl-C), rather than the child failing. */
    readonly stoppedDuringStartup = false,
  ) {
    super(message);
  }
}

/** The error a failed start-up throws: the caller's own class (WorkerError, ServerStartError). */
export type StartErrorClass = new (
  message: string,
  logTail: string,
  options: { hint?: string; cause?: unknown; stoppedDuringStartup?: boolean },
) => Error;

export interface SuperviseOptions<Ready> {
  /** What the child is, for messages: "the worker", "the embedded engine", "sglang". */
  label: string;
  command: string;
  args: readonly string[];
  /** Added to agentrl's own environment (PYTHONUNBUFFERED=1 is always set: lines arrive as they are printed). */
  env?: NodeJS.ProcessEnv;
  /**
   * How the child dies with a SIGKILLed agentrl: "guardian" runs it behind the guardian; "watches-parent" means the
   * child checks agentrl's pid itself (the caller passes it, as the worker's --parent-pid).
   */
  orphanGuard: "guardian" | "watches-parent";
  /** What stop() sends first. @default SIGTERM */
  stopSignal?: NodeJS.Signals;
  /** Between the stop signal and SIGKILL. @default 10 000 */
  graceMs?: number;
  /** How many output lines logTail() keeps. @default 40 */
  tailLines?: number;
  /** Appends the child's stdout and stderr here. */
  logFile?: string;
  /** Called with every output line. */
  onLine?: (line: string) => void;
  /**
   * Resolves once the child is ready, with what the caller needs from it (a socket, a URL); throws a StartupFailure
   * to fail start-up. `signal` aborts when start-up has failed otherwise: the probe should stop then.
   */
  ready: (child: SupervisedProcess, signal: AbortSignal) => Promise<Ready>;
  /** What the probe waits for, in the time-out message: "<label> did not <awaits> within N s". */
  awaits: string;
  startupTimeoutMs: number;
  timeoutHint?: string;
  /** Aborting it during start-up stops the child and fails with `stoppedDuringStartup`. */
  signal?: AbortSignal;
  startError: StartErrorClass;
  /** The hint for a child that exited during start-up, from its last lines. */
  exitHint?: (logTail: string) => string | undefined;
  /** The hint when the command cannot be started at all. */
  spawnHint?: string;
}

export interface SupervisedProcess {
  readonly label: string;
  /** The process group id: the pid of the guardian, or of the child itself when it has none. */
  readonly pid: number;
  /** How the group leader exited; undefined while it runs. */
  readonly exitStatus: ProcessExit | undefined;
  /** Settles when the group leader has exited and its output is read, whether asked to or not. */
  readonly exited: Promise<ProcessExit>;
  /** The last lines the child wrote. */
  logTail(): string[];
  /** Sends `signal` (the stop signal) to the group, SIGKILL after the grace period; resolves when it has exited. */
  stop(signal?: NodeJS.Signals): Promise<ProcessExit>;
  /** SIGKILL to the whole group at once, even when its leader has already exited. */
  kill(): void;
  /** Resolves with the exit when the group leader exits within `ms`, else with undefined. */
  waitForExit(ms: number): Promise<ProcessExit | undefined>;
}

/** Groups still running, with the signal agentrl's own exit sends them. */
const liveGroups = new Map<number, NodeJS.Signals>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => liveGroups.forEach((signal, pgid) => signalGroup(pgid, signal)));
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // already gone
  }
}

/** `signal SIGKILL` or `exit code 3`. */
export function describeExit(exit: { code: number | null; signal: NodeJS.Signals | null }): string {
  return exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code}`;
}

/**
 * Said in the child's log when a signal agentrl did not send ended it. A process killed by a signal prints nothing
 * itself, so without this line its log would end mid-stream with no cause; SIGKILL, which no process can catch, is
 * also what Linux's out-of-memory killer sends.
 */
function unexpectedSignalLine(label: string, pid: number, signal: NodeJS.Signals): string {
  const oom = signal === "SIGKILL" ? " (Linux's out-of-memory killer sends SIGKILL: see `dmesg`)" : "";
  return `agentrl: ${label} (pid ${pid}) was ended by ${signal}, which agentrl did not send${oom}`;
}

class ChildGroup implements SupervisedProcess {
  readonly exited: Promise<ProcessExit>;
  exitStatus: ProcessExit | undefined;
  private stopRequested = false;

  constructor(
    readonly label: string,
    readonly pid: number,
    child: ChildProcess,
    private readonly output: ChildOutput,
    private readonly stopping: { signal: NodeJS.Signals; graceMs: number; guarded: boolean },
  ) {
    liveGroups.set(pid, stopping.guarded ? "SIGTERM" : "SIGKILL"); // a guardian escalates to SIGKILL on its own
    installExitHook();
    this.exited = new Promise((resolve) => {
      let settled = false;
      const settle = (code: number | null, signal: NodeJS.Signals | null) => {
        if (settled) return;
        settled = true;
        if (signal && !this.stopRequested) output.note(unexpectedSignalLine(label, pid, signal));
        output.end();
        resolve({ code, signal, requested: this.stopRequested });
      };
      // "close" waits for the pipes, so the last lines are read, and only then is the whole group known to be gone
      // (nothing holds the pipes). A straggler of the group that inherited them could hold them open, so the leader's
      // own exit settles it too, shortly after; the exit hook still covers the group then.
      child.once("close", (code, signal) => {
        liveGroups.delete(pid);
        settle(code, signal);
      });
      child.once("exit", (code, signal) => {
        this.exitStatus = { code, signal, requested: this.stopRequested };
        setTimeout(() => settle(code, signal), PIPE_DRAIN_MS).unref();
      });
    });
  }

  // Arrow functions: a caller may pass them on unbound (`logTail: server.logTail`).
  readonly logTail = (): string[] => this.output.lastLines();

  readonly stop = async (signal: NodeJS.Signals = this.stopping.signal): Promise<ProcessExit> => {
    if (!liveGroups.has(this.pid)) return this.exited;
    this.stopRequested = true;
    signalGroup(this.pid, signal);
    // Ours to enforce even behind a guardian: a guardian that is itself stuck must not leave the group behind.
    const escalateMs = this.stopping.graceMs + (this.stopping.guarded ? GUARDIAN_SLACK_MS : 0);
    const timer = signal === "SIGKILL" ? undefined : setTimeout(() => signalGroup(this.pid, "SIGKILL"), escalateMs);
    await this.exited;
    clearTimeout(timer);
    return this.exited;
  };

  readonly kill = (): void => {
    this.stopRequested = true;
    signalGroup(this.pid, "SIGKILL");
  };

  readonly waitForExit = async (ms: number): Promise<ProcessExit | undefined> => {
    const timeout = new AbortController();
    const outcome = await Promise.race([this.exited, sleep(ms, undefined, { signal: timeout.signal }).catch(() => undefined)]);
    timeout.abort();
    return outcome;
  };
}

/** Spawns the child in a new process group, behind the guardian when asked; undefined pid when it cannot start. */
function spawnGroupLeader(options: Pick<SuperviseOptions<unknown>, "command" | "args" | "env" | "orphanGuard">, graceMs: number): ChildProcess {
  const env = { ...process.env, ...options.env, PYTHONUNBUFFERED: "1" };
  if (options.orphanGuard === "watches-parent") {
    return spawn(options.command, options.args, { env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  }
  const guardian = spawn(process.execPath, ["-e", GUARDIAN_SOURCE, "--", options.command, ...options.args], {
    env: { ...env, AGENTRL_GUARDIAN_GRACE_MS: String(graceMs) },
    // stdin is the liveness pipe: only this process holds its write end.
    stdio: ["pipe", "pipe", "pipe"],
    detached: true,
  });
  // The guardian going away closes this pipe; writing to it is never needed, but an EPIPE must not crash agentrl.
  guardian.stdin!.on("error", () => undefined);
  return guardian;
}

/** Starts the child and resolves once its probe says it is ready; on any failure the group is stopped first. */
export async function superviseProcess<Ready>(options: SuperviseOptions<Ready>): Promise<{ child: SupervisedProcess; ready: Ready }> {
  const graceMs = options.graceMs ?? 10_000;
  const leader = spawnGroupLeader(options, graceMs);
  if (leader.pid === undefined) {
    const err = await new Promise<Error>((resolve) => leader.once("error", resolve));
    throw new options.startError(`cannot start ${options.label}: ${err.message}`, "", { hint: options.spawnHint, cause: err });
  }
  const output = new ChildOutput({ tailLines: options.tailLines ?? 40, logFile: options.logFile, onLine: options.onLine });
  output.capture(leader.stdout!);
  output.capture(leader.stderr!);
  const child = new ChildGroup(options.label, leader.pid, leader, output, {
    signal: options.stopSignal ?? "SIGTERM",
    graceMs,
    guarded: options.orphanGuard === "guardian",
  });
  return { child, ready: await awaitReadiness(child, options) };
}

/** The probe's answer, or the caller's error once the child exited, timed out, failed the probe or was aborted. */
async function awaitReadiness<Ready>(child: ChildGroup, options: SuperviseOptions<Ready>): Promise<Ready> {
  const failed = new AbortController();
  const ms = options.startupTimeoutMs;
  let timer: NodeJS.Timeout | undefined;
  let onAbort = (): void => undefined;
  const failures = new Promise<never>((_, reject) => {
    const fail = (message: string, hint?: string) => reject(new StartupFailure(message, hint));
    timer = setTimeout(() => fail(`${options.label} did not ${options.awaits} within ${Math.round(ms / 1000)} s`, options.timeoutHint), ms);
    void child.exited.then((exit) => {
      const hint = failed.signal.aborted ? undefined : options.exitHint?.(child.logTail().join("\n"));
      fail(`${options.label} exited during start-up (${describeExit(exit)})`, hint);
    });
    onAbort = () => reject(new StartupFailure(`${options.label} was stopped during start-up`, undefined, true));
    if (options.signal?.aborted) onAbort();
    options.signal?.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([options.ready(child, failed.signal), failures]);
  } catch (err) {
    failed.abort();
    await child.stop();
    if (!(err instanceof StartupFailure)) throw err;
    throw new options.startError(err.message, child.logTail().join("\n"), {
      ...(err.hint === undefined ? {} : { hint: err.hint }),
      ...(err.stoppedDuringStartup ? { stoppedDuringStartup: true } : {}),
    });
  } finally {
    failed.abort();
    clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
  }
}
