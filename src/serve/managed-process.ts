/**
 * A long-running child (an inference engine or the SGLang router) that agentrl owns: started behind the guardian in
 * its own process group, its output kept (last lines in memory, everything in an optional log file), ready once its
 * /health answers 200 while it still runs (and, for a child that echoes a launch id, with that id: the answer may
 * otherwise come from another server on the same port), and stopped as a group. It never outlives agentrl: the
 * guardian sees agentrl's death through a pipe, and a normal exit of agentrl kills the group from an exit hook.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createWriteStream, mkdirSync, type WriteStream } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { GUARDIAN_SOURCE } from "./guardian.js";
import { EngineStartError } from "./errors.js";

const LOG_LINES_KEPT = 40;

/**
 * A child that echoes a launch id gets it in this variable and sends it back in this header (the embedded engine,
 * worker/agentrl_worker/engine/server.py). SGLang has no such echo; for it the port check before start must do.
 */
const LAUNCH_ID_ENV = "AGENTRL_LAUNCH_ID";
const LAUNCH_ID_HEADER = "x-agentrl-launch-id";

export interface ManagedProcessOptions {
  /** What the process is, for messages: "the embedded engine", "sglang". */
  label: string;
  command: string;
  args: readonly string[];
  /** Added to agentrl's own environment. */
  env?: Record<string, string>;
  /** The base URL to poll `/health` on; a function is asked again on every poll (the URL may come from a log line). */
  url: string | (() => string | undefined);
  startupTimeoutMs?: number;
  /** Between SIGTERM and SIGKILL when stopping. */
  graceMs?: number;
  /** Appends the child's stdout and stderr here. */
  logFile?: string;
  /** Called with every output line (after it is logged). */
  onLine?: (line: string) => void;
  /** Aborting it during start-up stops the child and rejects with `stoppedDuringStartup`. */
  signal?: AbortSignal;
  /**
   * The child echoes the AGENTRL_LAUNCH_ID it is given in an X-Agentrl-Launch-Id header: a /health answer without
   * this launch's id comes from some other server on the port, and start-up fails at once instead of reporting it.
   */
  echoesLaunchId?: boolean;
}

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** True when agentrl asked it to stop. */
  requested: boolean;
}

export interface ManagedProcess {
  readonly label: string;
  readonly url: string;
  /** The guardian's pid, which is also the process group id. */
  readonly pid: number;
  /** Settles when the process group leader exits, whether asked to or not. */
  readonly exited: Promise<ProcessExit>;
  /** The last lines the process wrote. */
  logTail(): string[];
  /** Sends `signal` (SIGTERM) to the group, SIGKILL after the grace period; resolves when it has exited. */
  stop(signal?: NodeJS.Signals): Promise<ProcessExit>;
}

/** Every group still running, killed when agentrl exits normally (process.exit included). */
const liveGroups = new Set<number>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on("exit", () => {
    // SIGTERM the groups; each guardian escalates to SIGKILL after its grace period on its own.
    for (const pgid of liveGroups) signalGroup(pgid, "SIGTERM");
  });
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // Already gone.
  }
}

export async function startManagedProcess(options: ManagedProcessOptions): Promise<ManagedProcess> {
  const graceMs = options.graceMs ?? 10_000;
  let log: WriteStream | undefined;
  if (options.logFile) {
    mkdirSync(path.dirname(path.resolve(options.logFile)), { recursive: true });
    log = createWriteStream(options.logFile, { flags: "a" });
  }
  const launchId = options.echoesLaunchId ? randomUUID() : undefined;
  const child: ChildProcess = spawn(process.execPath, ["-e", GUARDIAN_SOURCE, "--", options.command, ...options.args], {
    env: {
      ...process.env,
      ...options.env,
      PYTHONUNBUFFERED: "1",
      AGENTRL_GUARDIAN_GRACE_MS: String(graceMs),
      ...(launchId ? { [LAUNCH_ID_ENV]: launchId } : {}),
    },
    // stdin is the liveness pipe: only this process holds its write end.
    stdio: ["pipe", "pipe", "pipe"],
    detached: true,
  });
  const pid = child.pid;
  if (pid === undefined) {
    await new Promise((resolve) => child.once("error", resolve));
    throw new EngineStartError(`cannot start ${options.label}: node could not spawn the guardian`, "");
  }
  liveGroups.add(pid);
  installExitHook();

  const tail: string[] = [];
  const partial = { stdout: "", stderr: "" };
  let settled = false;
  const take = (stream: "stdout" | "stderr") => (chunk: Buffer) => {
    if (!settled) log?.write(chunk);
    const lines = (partial[stream] + chunk.toString("utf8")).split(/\r?\n/);
    partial[stream] = lines.pop() ?? "";
    for (const line of lines) {
      tail.push(line);
      if (tail.length > LOG_LINES_KEPT) tail.shift();
      options.onLine?.(line);
    }
  };
  child.stdout!.on("data", take("stdout"));
  child.stderr!.on("data", take("stderr"));
  // The child going away closes this pipe; writing to it is never needed, but an EPIPE must not crash agentrl.
  child.stdin!.on("error", () => undefined);

  let stopRequested = false;
  const exited = new Promise<ProcessExit>((resolve) => {
    const settle = (code: number | null, signal: NodeJS.Signals | null) => {
      if (settled) return;
      settled = true;
      for (const stream of ["stdout", "stderr"] as const) {
        if (partial[stream]) {
          tail.push(partial[stream]);
          options.onLine?.(partial[stream]);
        }
      }
      while (tail.length > LOG_LINES_KEPT) tail.shift();
      log?.end();
      resolve({ code, signal, requested: stopRequested });
    };
    // "close" waits for the pipes, so the last lines are in the tail; but a straggler of the group that inherited
    // them could hold them open, so the guardian's own exit settles it too, shortly after.
    child.once("close", (code, signal) => {
      // Only now is the whole group known to be gone (nothing holds the pipes); until then the exit hook keeps it.
      liveGroups.delete(pid);
      settle(code, signal);
    });
    child.once("exit", (code, signal) => setTimeout(() => settle(code, signal), 2_000).unref());
  });

  const stop = async (signal: NodeJS.Signals = "SIGTERM"): Promise<ProcessExit> => {
    if (liveGroups.has(pid)) {
      stopRequested = true;
      signalGroup(pid, signal);
      // Also ours to enforce: a guardian that is itself stuck must not leave the group behind.
      const timer = setTimeout(() => signalGroup(pid, "SIGKILL"), graceMs + 2_000);
      await exited;
      clearTimeout(timer);
    }
    return exited;
  };

  const urlNow = () => (typeof options.url === "string" ? options.url : options.url());
  const timeoutMs = options.startupTimeoutMs ?? 600_000;
  const deadline = Date.now() + timeoutMs;
  let exitedEarly: ProcessExit | undefined;
  void exited.then((exit) => (exitedEarly = exit));
  const failure = async (message: string, hint?: string): Promise<never> => {
    await stop();
    throw new EngineStartError(message, tail.join("\n"), hint === undefined ? {} : { hint });
  };

  while (true) {
    if (exitedEarly) {
      const how = exitedEarly.signal ? `signal ${exitedEarly.signal}` : `exit code ${exitedEarly.code}`;
      throw new EngineStartError(`${options.label} exited during start-up (${how})`, tail.join("\n"), {
        hint: options.logFile ? `its full log is ${options.logFile}` : "its last lines are above",
      });
    }
    if (options.signal?.aborted) {
      await stop("SIGTERM");
      throw new EngineStartError(`${options.label} was stopped during start-up`, tail.join("\n"), { stoppedDuringStartup: true });
    }
    if (Date.now() > deadline) {
      return failure(`${options.label} did not answer /health within ${Math.round(timeoutMs / 1000)} s`, "raise --startup-timeout for large models");
    }
    const url = urlNow();
    if (url !== undefined) {
      const answer = await probeHealth(url, launchId);
      if (answer === "foreign") {
        return failure(`${url} answers /health, but not from ${options.label} agentrl started: another server listens on that port`, "stop the other server or choose another --port");
      }
      // A child that already exited cannot be what answered; the next round reports its exit with its last lines.
      if (answer === "ready" && child.exitCode === null && child.signalCode === null) break;
    }
    await Promise.race([sleep(250), exited]);
  }
  const url = urlNow()!;
  return { label: options.label, url, pid, exited, logTail: () => [...tail], stop };
}

/** "ready": 200 (with this launch's id when one is expected); "foreign": 200 from a server without it; else "down". */
async function probeHealth(url: string, launchId: string | undefined): Promise<"ready" | "foreign" | "down"> {
  try {
    const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5_000) });
    await response.arrayBuffer();
    if (response.status !== 200) return "down";
    return launchId === undefined || response.headers.get(LAUNCH_ID_HEADER) === launchId ? "ready" : "foreign";
  } catch {
    return "down";
  }
}
