/**
 * A persistent Python helper process spoken to in JSON lines on stdin/stdout: the reward host
 * (src/rewards/python-reward.ts) and the tool host (src/tools/python-host-tool.ts). The first line the process prints
 * is its start-up line (`{"ready": true, ...}` or `{"ready": false, "kind", "error", ...}`); every later line goes to
 * `onMessage`. Its stderr is echoed with a prefix and its last lines kept for error messages.
 *
 * The process runs in its own process group, so a kill reaches whatever it started. It dies with agentrl: close() on
 * every exit path of a run, a process-exit hook for the rest, and for a SIGKILLed agentrl the process watches its
 * parent pid itself (`--parent-pid`), or runs under bubblewrap's `--die-with-parent`.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";
import { WORKER_DIR } from "../repo-paths.js";
import { loopbackNoProxy } from "./no-proxy.js";

const STDERR_TAIL_LINES = 20;

/** The start-up line of a host, or the failure agentrl saw instead. */
export interface HostHello {
  ready: boolean;
  kind?: string;
  error?: string;
  [key: string]: unknown;
}

/** Process groups of hosts still running: agentrl's own exit kills them. */
const liveGroups = new Set<number>();
let exitHookInstalled = false;

export function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // already gone
  }
}

function parseLine(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

export interface JsonLinesHostOptions {
  command: string;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  /** What the process is, for messages: "the reward process". */
  label: string;
  /** Prefix of the process's stderr lines echoed to agentrl's stderr: "reward". */
  stderrPrefix: string;
  /** Every JSON line after the start-up line. */
  onMessage(message: unknown): void;
  /** The process is gone (exited or never started); called once, after its last line was read. */
  onClose(): void;
}

export class JsonLinesHost {
  readonly hello: Promise<HostHello>;
  /** How the process ended: `exit code 7`, `signal SIGKILL`, `cannot start ...`. */
  exitText = "";
  private readonly child: ChildProcess;
  private readonly stderrTail: string[] = [];
  private gone = false;

  constructor(private readonly options: JsonLinesHostOptions) {
    this.child = spawn(options.command, [...options.args], { env: options.env, stdio: ["pipe", "pipe", "pipe"], detached: true });
    this.child.stdin?.on("error", () => undefined);
    if (this.child.pid !== undefined) track(this.child.pid);
    this.hello = this.listen();
  }

  get closed(): boolean {
    return this.gone;
  }

  private listen(): Promise<HostHello> {
    return new Promise((resolve) => {
      let greeted = false;
      this.child.once("error", (err) => {
        this.exitText = `cannot start ${this.options.command}: ${err.message}`;
        this.ended();
        resolve({ ready: false, kind: "spawn", error: this.exitText });
      });
      this.child.once("exit", (code, signal) => {
        if (!this.exitText) this.exitText = signal ? `signal ${signal}` : `exit code ${code}`;
        // Lines still in the pipes are read before "close"; only then is the process known to be gone.
        this.child.once("close", () => {
          this.ended();
          if (!greeted) resolve({ ready: false, kind: "exit", error: `${this.options.label} exited during start-up (${this.exitText})` });
        });
      });
      if (!this.child.stdout || !this.child.stderr) return; // not spawned: the "error" event says why
      createInterface({ input: this.child.stderr }).on("line", (line) => this.stderrLine(line));
      createInterface({ input: this.child.stdout }).on("line", (line) => {
        const message = parseLine(line);
        if (message === undefined) return; // not ours: the host sends only JSON
        if (greeted) return this.options.onMessage(message);
        greeted = true;
        resolve(message as HostHello);
      });
    });
  }

  private ended(): void {
    if (this.gone) return;
    this.gone = true;
    if (this.child.pid !== undefined) liveGroups.delete(this.child.pid);
    this.options.onClose();
  }

  private stderrLine(line: string): void {
    this.stderrTail.push(line);
    if (this.stderrTail.length > STDERR_TAIL_LINES) this.stderrTail.shift();
    process.stderr.write(`${this.options.stderrPrefix}: ${line}\n`);
  }

  /** The last non-empty line the process wrote to stderr. */
  lastStderr(): string {
    return this.stderrTail.filter((line) => line.trim()).at(-1) ?? "";
  }

  send(message: unknown): void {
    if (!this.gone) this.child.stdin!.write(JSON.stringify(message) + "\n");
  }

  /** SIGKILL to the process and anything it started; onClose follows. */
  kill(): void {
    if (this.child.pid !== undefined) killGroup(this.child.pid);
  }

  /** Ends the process: end of input (after `lastWords`, when given), then SIGKILL when it has not exited within a second. */
  async close(lastWords?: unknown): Promise<void> {
    if (this.gone) return;
    const closed = new Promise<void>((resolve) => this.child.once("close", () => resolve()));
    if (lastWords !== undefined) this.send(lastWords);
    this.child.stdin!.end();
    const timer = setTimeout(() => this.kill(), 1_000);
    await closed;
    clearTimeout(timer);
  }
}

function track(pid: number): void {
  liveGroups.add(pid);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once("exit", () => liveGroups.forEach(killGroup));
  }
}

/** Resolves like `hello`, or with a failed start-up line after `ms`. */
export async function helloWithin(hello: Promise<HostHello>, ms: number, label: string): Promise<HostHello> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<HostHello>((resolve) => {
    timer = setTimeout(() => resolve({ ready: false, kind: "timeout", error: `${label} did not start within ${ms / 1000} s` }), ms);
  });
  try {
    return await Promise.race([hello, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * agentrl's environment plus what a host needs: unbuffered output, the worker package on PYTHONPATH, and loopback
 * past any proxy (no-proxy.ts: a function agent's client reaches the gateway there).
 */
export function hostEnv(extraPath: readonly string[] = []): NodeJS.ProcessEnv {
  const pythonPath = [WORKER_DIR, ...extraPath, process.env["PYTHONPATH"]].filter(Boolean).join(path.delimiter);
  return { ...process.env, ...loopbackNoProxy(process.env), PYTHONUNBUFFERED: "1", PYTHONPATH: pythonPath };
}
