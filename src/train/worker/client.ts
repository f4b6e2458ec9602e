/**
 * Starts the persistent PyTorch worker under torchrun and talks to it over a Unix socket, one JSON command per line
 * (docs/worker-protocol.md). The CLI listens; worker rank 0 connects. Closing the socket stops every rank, and the
 * worker runs in its own process group so `kill()` takes torchrun and all its ranks down together.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { StringDecoder } from "node:string_decoder";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { InputError, WorkerError, WorkerInputError } from "../../errors.js";
import { torchThreadEnv } from "../../torch-threads.js";
import {
  readyEvent,
  replyEnvelope,
  type Command,
  type ComputeLogProbsResult,
  type FingerprintResult,
  type InitResult,
  type PathResult,
  type RequestFields,
  type Result,
  type SftEvalResult,
  type SftStepResult,
  type UpdateResult,
  type WorkerErrorBody,
  type WorkerInitConfig,
} from "./protocol.js";
import { replyProblem, requestProblem } from "./validate.js";

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const LOG_LINES_KEPT = 80;
/** How long a crashed worker may take to exit before its process group is killed. */
const WORKER_EXIT_GRACE_MS = 5000;

/**
 * Keeps the last LOG_LINES_KEPT meaningful lines. Python 3.11 tracebacks mark columns with lines of `^` and `~`, and
 * torchrun prints its own long traceback after a rank fails: without this filter they push the rank's actual error
 * out of the tail a user sees.
 */
function keepLogLine(tail: string[], line: string): void {
  const plain = line.replace(/\u001b\[[0-9;]*m/g, ""); // colour codes (FORCE_COLOR) would hide a marker-only line
  if (/^[\s^~]*$/.test(plain)) return;
  tail.push(plain);
  if (tail.length > LOG_LINES_KEPT) tail.shift();
}

/** Splits a stream's chunks into whole lines: a line (or a UTF-8 character) cut between two chunks stays whole. */
class LineBuffer {
  private readonly decoder = new StringDecoder("utf8");
  private rest = "";
  push(chunk: Buffer): string[] {
    const lines = (this.rest + this.decoder.write(chunk)).split(/\r?\n/);
    this.rest = lines.pop() ?? "";
    return lines.filter((line) => line !== "");
  }
}

/** Worker process groups still alive; killed when this process exits, however it exits, so no rank is orphaned. */
const liveGroups = new Set<ChildProcess>();
let exitHookInstalled = false;
function track(child: ChildProcess): void {
  liveGroups.add(child);
  child.once("exit", () => liveGroups.delete(child));
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once("exit", () => liveGroups.forEach(killGroup));
  }
}

export interface WorkerStartOptions {
  /** Ranks on this node (torchrun --nproc_per_node). */
  nprocPerNode?: number;
  /** Extra torchrun flags, e.g. multi-node `--nnodes 2 --node_rank 0 --rdzv_endpoint host:port`; default --standalone. */
  torchrunArgs?: string[];
  /** Python with torch; defaults to the repository's .venv. */
  python?: string;
  /** Folder holding the agentrl_worker package; defaults to the repository's worker/. */
  workerDir?: string;
  env?: NodeJS.ProcessEnv;
  /** How long torchrun may take to start and connect (imports take 10-15 s on CPU). */
  startTimeoutMs?: number;
  /** Called with each line the worker prints (its log), e.g. to write a run's log file. */
  onLog?: (line: string) => void;
}

export class WorkerClient {
  private buffer = "";
  private readonly logTail: string[] = [];
  private pending: { cmd: string; resolve: (line: string) => void; reject: (err: Error) => void } | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private nextId = 0;
  private exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;

  private constructor(
    private readonly child: ChildProcess,
    private readonly server: net.Server,
    private socket: net.Socket | undefined,
    /** Ranks in the job. */
    readonly worldSize: number,
    /** Process id of rank 0 (from its ready event). */
    readonly rank0Pid: number,
  ) {}

  /** Process id of torchrun, also the id of the process group holding every rank. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Whether torchrun has exited. */
  get exited(): boolean {
    return this.exit !== undefined;
  }

  /** Launches torchrun and resolves once rank 0 has connected and said it is ready. */
  static async start(options: WorkerStartOptions = {}): Promise<WorkerClient> {
    const socketDir = mkdtempSync(path.join(os.tmpdir(), "agentrl-w-"));
    const socketPath = path.join(socketDir, "w.sock"); // AF_UNIX paths are limited to about 107 bytes
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(socketPath, () => resolve());
    });
    const workerDir = options.workerDir ?? path.join(REPO_ROOT, "worker");
    const python = options.python ?? path.join(REPO_ROOT, ".venv", "bin", "python");
    const args = [
      "-m",
      "torch.distributed.run",
      ...(options.torchrunArgs ?? ["--standalone"]),
      `--nproc_per_node=${options.nprocPerNode ?? 1}`,
      "-m",
      "agentrl_worker",
      "--socket",
      socketPath,
      // Ranks on this machine exit when this process is gone, even after a SIGKILL that leaves no time to clean up.
      "--parent-pid",
      String(process.pid),
    ];
    const env = { ...process.env, ...torchThreadEnv({ ...process.env, ...options.env }), ...options.env };
    env.PYTHONPATH = env.PYTHONPATH ? `${workerDir}${path.delimiter}${env.PYTHONPATH}` : workerDir;
    env.PYTHONUNBUFFERED = "1";
    const child = spawn(python, args, { env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    track(child);
    const tail: string[] = [];
    const stdoutLines = new LineBuffer();
    const stderrLines = new LineBuffer();
    const collect = (lines: string[]) => {
      for (const line of lines) {
        keepLogLine(tail, line);
        options.onLog?.(line);
      }
    };
    const collectStdout = (c: Buffer) => collect(stdoutLines.push(c));
    const collectStderr = (c: Buffer) => collect(stderrLines.push(c));
    child.stdout!.on("data", collectStdout);
    child.stderr!.on("data", collectStderr);

    const cleanup = () => {
      killGroup(child);
      server.close();
      rmSync(socketDir, { recursive: true, force: true });
    };
    let socket: net.Socket;
    let firstLine: string;
    let onEarlyExit = (_code: number | null, _signal: NodeJS.Signals | null): void => undefined;
    let onEarlyError = (_err: Error): void => undefined;
    try {
      [socket, firstLine] = await new Promise<[net.Socket, string]>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new WorkerError(`the worker did not connect within ${(options.startTimeoutMs ?? 180_000) / 1000} s`, tail.join("\n"))),
          options.startTimeoutMs ?? 180_000,
        );
        onEarlyError = (err: Error) => {
          clearTimeout(timer);
          reject(new WorkerError(`cannot start ${python}: ${err.message}`, "", { cause: err, hint: "run scripts/install.sh to create .venv" }));
        };
        onEarlyExit = (code: number | null, signal: NodeJS.Signals | null) => {
          clearTimeout(timer);
          // Let the pipes drain so the error carries the worker's last words.
          setTimeout(() => {
            const log = tail.join("\n");
            // A checkout updated without re-running the installer lacks a newly added dependency (e.g. jsonschema).
            const hint = /ModuleNotFoundError: No module named/.test(log) ? "run scripts/install.sh to install the worker's Python packages" : undefined;
            reject(new WorkerError(`the worker exited during start-up (${signal ?? `code ${code}`})`, log, { hint }));
          }, 100);
        };
        child.once("error", onEarlyError);
        child.once("exit", onEarlyExit);
        server.once("connection", (conn) => {
          let text = "";
          const onData = (chunk: Buffer) => {
            text += chunk.toString("utf8");
            const newline = text.indexOf("\n");
            if (newline < 0) return;
            conn.off("data", onData);
            clearTimeout(timer);
            conn.pause();
            conn.unshift(Buffer.from(text.slice(newline + 1), "utf8"));
            resolve([conn, text.slice(0, newline)]);
          };
          conn.on("data", onData);
        });
      });
    } catch (err) {
      cleanup();
      throw err;
    }
    const ready = readyEvent.safeParse(safeJson(firstLine));
    if (!ready.success) {
      cleanup();
      throw new WorkerError(`the worker's first message is not a ready event: ${firstLine.slice(0, 200)}`, tail.join("\n"));
    }
    child.off("exit", onEarlyExit);
    child.off("error", onEarlyError);
    // Rank 0 is connected and no one else connects: the socket's name can go now, so even a CLI killed with
    // SIGKILL later leaves nothing in $TMPDIR (the connection lives on without it).
    rmSync(socketDir, { recursive: true, force: true });
    const client = new WorkerClient(child, server, socket, ready.data.world_size, ready.data.pid);
    client.logTail.push(...tail);
    child.stdout!.off("data", collectStdout);
    child.stderr!.off("data", collectStderr);
    child.stdout!.on("data", (c: Buffer) => client.onLog(stdoutLines.push(c), options.onLog));
    child.stderr!.on("data", (c: Buffer) => client.onLog(stderrLines.push(c), options.onLog));
    child.on("exit", (code, signal) => client.onExit(code, signal));
    socket.on("data", (c: Buffer) => client.onData(c));
    socket.on("close", () => client.onSocketClosed());
    // A reset when a rank dies is expected; "close" follows and fails the pending command with the log tail.
    socket.on("error", () => undefined);
    socket.resume();
    return client;
  }

  init(config: WorkerInitConfig): Promise<InitResult> {
    return this.command("init", { config });
  }

  /** Writes old_log_probs, entropy and (with use_ref) ref_log_probs for the batch to `out`. */
  computeLogProbs(batch: string, out: string): Promise<ComputeLogProbsResult> {
    return this.command("compute_log_probs", { batch, out });
  }

  /** One GRPO/PPO update on the batch, with the log-prob file computeLogProbs wrote for it. */
  update(batch: string, logProbs: string): Promise<UpdateResult> {
    return this.command("update", { batch, log_probs: logProbs });
  }

  /** One supervised fine-tuning step on the batch: token-mean cross-entropy over its response_mask tokens. */
  sftStep(batch: string): Promise<SftStepResult> {
    return this.command("sft_step", { batch });
  }

  /** The SFT loss of a batch without training (validation). */
  sftEval(batch: string): Promise<SftEvalResult> {
    return this.command("sft_eval", { batch });
  }

  /** A Hugging Face folder SGLang can load with /update_weights_from_disk; dtype defaults to the model's own. */
  saveWeights(dir: string, dtype?: "float32" | "bfloat16" | "float16"): Promise<PathResult> {
    return this.command("save_weights", dtype ? { dir, dtype } : { dir });
  }

  saveCheckpoint(dir: string): Promise<PathResult> {
    return this.command("save_checkpoint", { dir });
  }

  loadCheckpoint(dir: string): Promise<PathResult> {
    return this.command("load_checkpoint", { dir });
  }

  fingerprint(): Promise<FingerprintResult> {
    return this.command("fingerprint", {});
  }

  /** Asks the worker to stop, waits for every rank to exit, and cleans up; kills the group if it lingers. */
  async shutdown(graceMs = 30_000): Promise<void> {
    if (!this.exit && this.socket) {
      try {
        await this.command("shutdown", {});
      } catch {
        // already gone: fall through to the wait and kill below
      }
    }
    await this.waitForExit(graceMs);
    this.dispose();
  }

  /** Kills torchrun and every rank at once (SIGKILL to the process group). */
  kill(): void {
    killGroup(this.child);
    this.dispose();
  }

  get recentLog(): string {
    return this.logTail.join("\n");
  }

  private async command<C extends Command>(cmd: C, fields: RequestFields<C>): Promise<Result<C>> {
    const reply = await this.send(cmd, fields);
    const problem = replyProblem(cmd, reply);
    if (problem) throw new WorkerError(`the worker's ${cmd} reply does not match the protocol: ${problem}`, this.recentLog);
    const { id: _id, ok: _ok, ...result } = reply;
    return result as Result<C>;
  }

  /** Sends one command and resolves with its successful reply; commands are serialised. */
  private send<C extends Command>(cmd: C, fields: RequestFields<C>): Promise<Record<string, unknown>> {
    const run = async () => {
      if (this.exit || !this.socket) throw this.crashError(`cannot send ${cmd}: the worker is not running`);
      const id = ++this.nextId;
      const request = { id, cmd, ...fields };
      // Caught here, a bad value names its field before the worker sees it; the worker would refuse it the same way.
      const problem = requestProblem(request);
      if (problem) throw new InputError(`the worker's ${cmd} command: ${problem}`);
      const line = await new Promise<string>((resolve, reject) => {
        this.pending = { cmd, resolve, reject };
        this.socket!.write(JSON.stringify(request) + "\n");
      });
      const envelope = replyEnvelope.safeParse(safeJson(line));
      if (!envelope.success) throw new WorkerError(`the worker sent a malformed reply: ${line.slice(0, 200)}`, this.recentLog);
      const reply = envelope.data;
      if (reply.id !== id) throw new WorkerError(`the worker answered command ${reply.id} while ${id} (${cmd}) was pending`, this.recentLog);
      if (!reply.ok) throw workerFailure(cmd, (reply as { error: WorkerErrorBody }).error, this.recentLog);
      return reply as Record<string, unknown>;
    };
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }

  private onData(chunk: Buffer): void {
    this.buffer += chunk.toString("utf8");
    let newline: number;
    while ((newline = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + 1);
      if (!line.trim()) continue;
      const pending = this.pending;
      this.pending = undefined;
      pending?.resolve(line);
    }
  }

  private onLog(lines: string[], sink?: (line: string) => void): void {
    for (const line of lines) {
      keepLogLine(this.logTail, line);
      sink?.(line);
    }
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.exit = { code, signal };
    this.failPending();
  }

  private onSocketClosed(): void {
    this.socket = undefined;
    this.failPending();
  }

  private failPending(): void {
    const pending = this.pending;
    this.pending = undefined;
    // torchrun takes a moment to notice a dead rank, stop the others and exit: wait for that (a few seconds at most),
    // so the error carries its exit status and the ranks' last log lines.
    if (pending) {
      void this.waitForExit(WORKER_EXIT_GRACE_MS).then(() =>
        pending.reject(this.crashError(`the worker stopped during '${pending.cmd}'`)),
      );
    }
  }

  private crashError(message: string): WorkerError {
    const how = this.exit ? ` (${this.exit.signal ?? `exit code ${this.exit.code}`})` : "";
    return new WorkerError(`${message}${how}`, this.recentLog, { hint: "the worker's last log lines are attached; see the run's worker log" });
  }

  private waitForExit(ms: number): Promise<void> {
    if (this.exit) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        killGroup(this.child);
        resolve();
      }, ms);
      this.child.once("exit", () => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private dispose(): void {
    this.socket?.destroy();
    this.socket = undefined;
    this.server.close();
  }
}

function killGroup(child: ChildProcess): void {
  // Signal the group even when torchrun itself has exited, in case a rank outlived it.
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // the group is already gone
  }
}

/** The worker's InputError is the user's to fix, like the CLI's own (exit 2); anything else is a worker failure. */
function workerFailure(cmd: string, error: WorkerErrorBody, recentLog: string): WorkerError {
  const Failure = error.type === "InputError" ? WorkerInputError : WorkerError;
  return new Failure(`worker ${cmd} failed: ${error.type}: ${error.message}`, error.traceback ?? recentLog);
}

function safeJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}
