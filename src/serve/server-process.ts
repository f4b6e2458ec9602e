/**
 * An HTTP server child agentrl owns (an inference server or the SGLang router), run by the supervisor
 * (src/process/supervisor.ts) behind the guardian. It is ready once its /health answers 200 while it still runs (and,
 * for a child that echoes a launch id, with that id: the answer may otherwise come from another server on the same
 * port).
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { StartupFailure, superviseProcess, type SupervisedProcess } from "../process/index.js";
import { ServerStartError } from "./errors.js";

/**
 * A child that echoes a launch id gets it in this variable and sends it back in this header (the embedded server,
 * worker/agentrl_worker/embedded_server/server.py). SGLang has no such echo; for it the port check before start must do.
 */
const LAUNCH_ID_ENV = "AGENTRL_LAUNCH_ID";
const LAUNCH_ID_HEADER = "x-agentrl-launch-id";
/** The log lines a start-up error carries (docs/serve-and-doctor.md). */
const LOG_LINES_KEPT = 40;

export interface ServerProcessOptions {
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

export interface ServerProcess extends SupervisedProcess {
  readonly url: string;
}

export async function startServerProcess(options: ServerProcessOptions): Promise<ServerProcess> {
  const launchId = options.echoesLaunchId ? randomUUID() : undefined;
  const started = await superviseProcess({
    label: options.label,
    command: options.command,
    args: options.args,
    env: { ...options.env, ...(launchId ? { [LAUNCH_ID_ENV]: launchId } : {}) },
    orphanGuard: "guardian",
    graceMs: options.graceMs,
    tailLines: LOG_LINES_KEPT,
    logFile: options.logFile,
    onLine: options.onLine,
    ready: (child, stopped) => waitForHealth(options, launchId, child, stopped),
    awaits: "answer /health",
    startupTimeoutMs: options.startupTimeoutMs ?? 600_000,
    timeoutHint: "raise --startup-timeout for large models",
    signal: options.signal,
    startError: ServerStartError,
    exitHint: () => (options.logFile ? `its full log is ${options.logFile}` : "its last lines are above"),
  });
  return Object.assign(started.child, { url: started.ready });
}

/** Polls /health until this child answers; resolves with the URL it answered on. */
async function waitForHealth(options: ServerProcessOptions, launchId: string | undefined, child: SupervisedProcess, stopped: AbortSignal): Promise<string> {
  while (!stopped.aborted) {
    const url = typeof options.url === "string" ? options.url : options.url();
    if (url !== undefined) {
      const answer = await probeHealth(url, launchId);
      if (answer === "foreign") {
        throw new StartupFailure(
          `${url} answers /health, but not from ${options.label} agentrl started: another server listens on that port`,
          "stop the other server or choose another --port",
        );
      }
      // A child that already exited cannot be what answered; the supervisor reports its exit with its last lines.
      if (answer === "ready" && child.exitStatus === undefined) return url;
    }
    await sleep(250);
  }
  // Start-up has already failed (exit, time-out, abort) and the supervisor reports that; nobody awaits this.
  throw new StartupFailure(`${options.label} stopped polling /health`);
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
