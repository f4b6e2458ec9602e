/**
 * Python reward functions (verl's custom_reward_function with a .py file): a small pool of persistent
 * `python -m agentrl_worker.reward_host FILE NAME` processes, started once per run, each loading the file once and
 * answering JSON lines on stdin/stdout (worker/agentrl_worker/reward_host.py). Calls queue up as trajectories finish
 * and go out in batches to whichever process is idle. Each call has a time limit: a call past it kills its process,
 * which is restarted, and only that call fails; the rest of its batch is sent again.
 *
 * The processes die with agentrl: close() on every exit path of a run, a process-exit hook for the rest, and for a
 * SIGKILLed agentrl each host notices it was orphaned (its stdin closes, and it watches its parent pid even while a
 * reward function hangs).
 */
import { availableParallelism } from "node:os";
import { InputError } from "../errors.js";
import { JsonLinesHost, defaultPythonExecutable, helloWithin, hostEnv, type HostHello } from "../process/index.js";

/** The most calls one request carries: a large batch would hold a process while others sit idle. */
const MAX_BATCH = 16;
/** How long a process may take to import the reward file and answer its first line. */
const STARTUP_TIMEOUT_MS = 60_000;

export interface PythonRewardOptions {
  /** The interpreter; null/undefined: the repository's .venv/bin/python when it exists, else python3 (looked up on PATH). */
  executable?: string | null;
  /** How many processes; null/undefined: min(4, CPU count). */
  workers?: number | null;
  /** Seconds one call may take. */
  timeout: number;
}

/** Which trajectory a call scores, for error messages. */
export interface RewardRow {
  dataIndex: number;
  trajectoryId: string;
}

/** One call as the host reads it (verl's compute_score arguments). */
export interface PythonRewardCall {
  data_source: string;
  solution_str: string;
  ground_truth: string;
  extra_info: Record<string, unknown>;
  reward_kwargs: Record<string, unknown>;
}

export interface PythonRewardResult {
  score: number;
  extra: Record<string, unknown>;
}

export const defaultRewardPython = defaultPythonExecutable;

export function defaultRewardWorkers(): number {
  return Math.max(1, Math.min(4, availableParallelism()));
}

function rowLabel(row: RewardRow | undefined): string {
  return row ? `data_index ${row.dataIndex} (trajectory ${row.trajectoryId})` : "a trajectory";
}

interface PendingCall {
  id: number;
  call: PythonRewardCall;
  row: RewardRow | undefined;
  resolve(result: PythonRewardResult): void;
  reject(err: Error): void;
}

interface Reply {
  id?: number;
  ok?: boolean;
  score?: number;
  extra?: Record<string, unknown>;
  error?: string;
}

/** Where a host is: what the pool hears from it. */
interface HostEvents {
  /** A call is done (settled); the host may have become idle. */
  onSettled(host: RewardHost): void;
  /** The host died or was killed; `requeue` are the calls it had not started. */
  onDead(host: RewardHost, requeue: PendingCall[]): void;
}

/** One `reward_host` process and the calls it is working through, in order. */
class RewardHost {
  readonly hello: Promise<HostHello>;
  private readonly process: JsonLinesHost;
  private readonly inflight: PendingCall[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** Said it was ready: only such a host is replaced when it dies (a host that never started is not retried). */
  private started = false;
  /** Killed after a time-out: its head call has failed already, the rest go to a fresh host. */
  private timedOut = false;

  constructor(
    private readonly fn: { file: string; name: string; python: string; timeoutMs: number },
    private readonly events: HostEvents,
  ) {
    this.process = new JsonLinesHost({
      command: fn.python,
      args: ["-m", "agentrl_worker.reward_host", fn.file, fn.name, "--parent-pid", String(process.pid)],
      env: hostEnv(),
      label: "the reward process",
      stderrPrefix: "reward",
      onMessage: (message) => this.reply(message as Reply),
      onClose: () => this.died(),
    });
    this.hello = this.process.hello.then((hello) => {
      this.started = hello.ready === true;
      return hello;
    });
  }

  get idle(): boolean {
    return this.started && !this.process.closed && this.inflight.length === 0;
  }

  lastStderr(): string {
    return this.process.lastStderr();
  }

  send(calls: PendingCall[]): void {
    this.inflight.push(...calls);
    this.process.send({ batch: calls.map((c) => ({ id: c.id, ...c.call })) });
    if (this.inflight.length === calls.length) this.armTimer();
  }

  private armTimer(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const head = this.inflight[0];
    if (!head) return;
    this.timer = setTimeout(() => {
      const seconds = this.fn.timeoutMs / 1000;
      this.failHead(`${this.describe()} timed out after ${seconds} s on ${rowLabel(head.row)}; its process was killed and restarted`);
      this.timedOut = true;
      this.kill();
    }, this.fn.timeoutMs);
  }

  private describe(): string {
    return `reward function ${this.fn.name} in ${this.fn.file}`;
  }

  private reply(reply: Reply): void {
    const head = this.inflight[0];
    if (!head || reply.id !== head.id) return;
    this.inflight.shift();
    if (reply.ok && typeof reply.score === "number" && Number.isFinite(reply.score)) {
      head.resolve({ score: reply.score, extra: reply.extra ?? {} });
    } else {
      const verb = reply.error?.startsWith("returned ") ? "" : "raised ";
      head.reject(new Error(`${this.describe()} ${verb}on ${rowLabel(head.row)}: ${reply.error ?? "no answer"}`));
    }
    this.armTimer();
    this.events.onSettled(this);
  }

  private failHead(message: string): void {
    const head = this.inflight.shift();
    head?.reject(new Error(message));
  }

  private died(): void {
    clearTimeout(this.timer);
    const head = this.inflight[0];
    if (head && !this.timedOut) {
      const last = this.lastStderr();
      this.failHead(`the reward process (${this.describe()}) exited (${this.process.exitText}) while scoring ${rowLabel(head.row)}${last ? `: ${last}` : ""}`);
    }
    if (this.started) this.events.onDead(this, this.inflight.splice(0));
  }

  /** SIGKILL to the host and anything it started; its calls settle through the exit. */
  kill(): void {
    this.process.kill();
  }

  /** Ends the host: end of input, then SIGKILL when it has not exited within a second. */
  close(): Promise<void> {
    return this.process.close();
  }
}

/** The pool of reward hosts; see the file comment. */
export class PythonRewardPool {
  private readonly hosts: RewardHost[] = [];
  private readonly queue: PendingCall[] = [];
  private nextId = 0;
  private flushScheduled = false;
  private closed = false;
  private readonly events: HostEvents = {
    onSettled: () => this.scheduleFlush(),
    onDead: (host, requeue) => this.replace(host, requeue),
  };

  private constructor(
    private readonly fn: { file: string; name: string; python: string; timeoutMs: number },
    readonly size: number,
  ) {}

  /** Starts `size` hosts; a file that does not load, or lacks the function, is an InputError (nothing stays running). */
  static async start(file: string, name: string, options: PythonRewardOptions): Promise<PythonRewardPool> {
    const python = options.executable ?? defaultRewardPython();
    const pool = new PythonRewardPool({ file, name, python, timeoutMs: options.timeout * 1000 }, options.workers ?? defaultRewardWorkers());
    for (let i = 0; i < pool.size; i++) pool.hosts.push(new RewardHost(pool.fn, pool.events));
    const hellos = await Promise.all(pool.hosts.map((host) => helloWithin(host.hello, STARTUP_TIMEOUT_MS, "the reward process")));
    const failed = hellos.findIndex((hello) => !hello.ready);
    if (failed >= 0) {
      const host = pool.hosts[failed]!;
      await pool.close();
      throw startupError(file, name, python, hellos[failed]!, host.lastStderr());
    }
    return pool;
  }

  /** Scores one trajectory; rejects with an error naming the row when the function raises, hangs or returns junk. */
  call(call: PythonRewardCall, row?: RewardRow): Promise<PythonRewardResult> {
    if (this.closed) return Promise.reject(new Error(`the reward pool for ${this.fn.file} is closed`));
    return new Promise((resolve, reject) => {
      this.queue.push({ id: this.nextId++, call, row, resolve, reject });
      this.scheduleFlush();
    });
  }

  /** Sends what is queued once the current turn of the event loop is over, so trajectories finishing together share requests. */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    const idle = this.hosts.filter((host) => host.idle);
    for (let i = 0; i < idle.length && this.queue.length > 0; i++) {
      const share = Math.min(MAX_BATCH, Math.ceil(this.queue.length / (idle.length - i)));
      idle[i]!.send(this.queue.splice(0, share));
    }
  }

  /** A host died (killed after a time-out, or crashed): a fresh one takes its place and its unstarted calls. */
  private replace(dead: RewardHost, requeue: PendingCall[]): void {
    const at = this.hosts.indexOf(dead);
    if (at >= 0) this.hosts.splice(at, 1);
    this.queue.unshift(...requeue);
    if (this.closed) return this.failQueued(`the reward pool for ${this.fn.file} is closed`);
    // In the list from the start (not idle until it is ready), so that close() ends it too.
    const host = new RewardHost(this.fn, this.events);
    this.hosts.push(host);
    void host.hello.then((hello) => {
      if (hello.ready) return this.scheduleFlush();
      this.hosts.splice(this.hosts.indexOf(host), 1);
      if (this.hosts.length === 0) this.failQueued(`the reward process for ${this.fn.file} could not be restarted: ${hello.error ?? "no answer"}`);
    });
  }

  private failQueued(message: string): void {
    for (const pending of this.queue.splice(0)) pending.reject(new Error(`${message} (${rowLabel(pending.row)})`));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.failQueued(`the reward pool for ${this.fn.file} is closed`);
    await Promise.all(this.hosts.map((host) => host.close()));
  }
}

function startupError(file: string, name: string, python: string, hello: HostHello, stderr: string): InputError {
  const functions = (hello["functions"] as string[] | undefined) ?? [];
  const listed = functions.length ? `it defines: ${functions.join(", ")}` : "it defines no functions";
  if (hello.kind === "missing" || hello.kind === "not_callable") {
    return new InputError(`reward file ${file}: ${hello.kind === "missing" ? `no function ${name}` : hello.error} (custom_reward_function.name); ${listed}`, {
      hint: `def ${name}(data_source, solution_str, ground_truth, extra_info=None, **kwargs): return 1.0, or set custom_reward_function.name`,
    });
  }
  if (hello.kind === "load") {
    return new InputError(`reward file ${file}: cannot be loaded to find ${name}: ${hello.error}`, { hint: "fix the file; `python FILE` shows the same error" });
  }
  const detail = [hello.error, stderr].filter(Boolean).join(": ");
  return new InputError(`reward file ${file}: cannot start the reward process for ${name} with ${python}: ${detail}`, {
    hint: "set custom_reward_function.python.executable to a Python 3 interpreter (the repository's .venv is the default)",
  });
}
