/**
 * Starts the persistent PyTorch worker (under torchrun for several ranks, alone for one) and talks to it over a Unix
 * socket, one JSON command per line (docs/worker-protocol.md). The CLI listens; worker rank 0 connects. Closing the
 * socket stops every rank. The worker's top process (torchrun, or the one rank) runs under the supervisor
 * (src/process) in its own process group, so `kill()` takes it and all its ranks down together.
 */
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { InputError, WorkerError, WorkerInputError } from "../../errors.js";
import { StartupFailure, superviseProcess, type SupervisedProcess } from "../../process/index.js";
import { torchProcessEnv } from "../../torch-threads.js";
import { WORKER_DIR, defaultPythonExecutable } from "../../repo-paths.js";
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
  type WEIGHT_DTYPES,
  type WeightBucketPlan,
  type WorkerErrorBody,
  type WorkerInitConfig,
} from "./protocol.js";
import { replyProblem, requestProblem } from "./validate.js";

type WeightDtype = (typeof WEIGHT_DTYPES)[number];

/** The worker's log lines an error carries: torchrun's own traceback follows a rank's. */
const LOG_LINES_KEPT = 80;
/** How long a crashed worker may take to exit before its process group is killed. */
const WORKER_EXIT_GRACE_MS = 5000;

export interface WorkerStartOptions {
  /** Ranks on this node (torchrun --nproc_per_node). */
  nprocPerNode?: number;
  /** Extra torchrun flags, e.g. multi-node `--nnodes 2 --node_rank 0 --rdzv_endpoint host:port`; default --standalone. */
  torchrunArgs?: string[];
  /** Python with torch; defaults to the repository's .venv/bin/python, else python3 on PATH (a GPU box's own). */
  python?: string;
  /** Folder holding the agentrl_worker package; defaults to the repository's worker/. */
  workerDir?: string;
  env?: NodeJS.ProcessEnv;
  /** How long torchrun may take to start and connect (imports take 10-15 s on CPU). */
  startTimeoutMs?: number;
  /** Called with each line the worker prints (its log), e.g. to write a run's log file. */
  onLog?: (line: string) => void;
}

/** Rank 0's connection, once it has said it is ready. */
interface Connected {
  socket: net.Socket;
  worldSize: number;
  rank0Pid: number;
}

export class WorkerClient {
  private buffer = "";
  private pending: { cmd: string; resolve: (line: string) => void; reject: (err: Error) => void } | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private nextId = 0;

  private constructor(
    private readonly child: SupervisedProcess,
    private readonly server: net.Server,
    private socket: net.Socket | undefined,
    /** Ranks in the job. */
    readonly worldSize: number,
    /** Process id of rank 0 (from its ready event). */
    readonly rank0Pid: number,
  ) {}

  /** Process id of torchrun (or of the one rank started alone), also the id of the process group holding every rank. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Whether the worker's top process (torchrun, or the one rank) has exited. */
  get exited(): boolean {
    return this.child.exitStatus !== undefined;
  }

  /**
   * Launches the worker and resolves once rank 0 has connected and said it is ready. The CLI listens on the socket
   * before the worker starts; the ranks on this machine watch the CLI's pid (`--parent-pid`), so they exit even after a
   * SIGKILL of the CLI that leaves no time to clean up.
   */
  static async start(options: WorkerStartOptions = {}): Promise<WorkerClient> {
    const socketDir = mkdtempSync(path.join(os.tmpdir(), "agentrl-w-"));
    const socketPath = path.join(socketDir, "w.sock"); // AF_UNIX paths are limited to about 107 bytes
    const server = net.createServer();
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(socketPath, () => resolve());
      });
      const workerDir = options.workerDir ?? WORKER_DIR;
      const env = { ...torchProcessEnv({ ...process.env, ...options.env }), ...options.env };
      env.PYTHONPATH = [workerDir, env.PYTHONPATH ?? process.env.PYTHONPATH].filter(Boolean).join(path.delimiter);
      const { child, ready: rank0 } = await superviseProcess({
        label: "the worker",
        command: options.python ?? defaultPythonExecutable(),
        args: workerArgs(options, socketPath),
        env,
        orphanGuard: "watches-parent",
        stopSignal: "SIGKILL",
        tailLines: LOG_LINES_KEPT,
        onLine: (line) => {
          if (line !== "") options.onLog?.(line);
        },
        ready: () => rank0Connection(server),
        awaits: "connect",
        startupTimeoutMs: options.startTimeoutMs ?? 180_000,
        startError: WorkerError,
        spawnHint: "run scripts/install.sh to create .venv, or put a python3 with torch and transformers on PATH",
        // A checkout updated without re-running the installer lacks a newly added dependency (e.g. jsonschema).
        exitHint: (log) => (/ModuleNotFoundError: No module named/.test(log) ? "run scripts/install.sh to install the worker's Python packages" : undefined),
      });
      return new WorkerClient(child, server, rank0.socket, rank0.worldSize, rank0.rank0Pid).listen();
    } catch (err) {
      server.close();
      throw err;
    } finally {
      // Rank 0 is connected and no one else connects (or start-up failed): the socket's name can go now, so even a
      // CLI killed with SIGKILL later leaves nothing in $TMPDIR (the connection lives on without it).
      rmSync(socketDir, { recursive: true, force: true });
    }
  }

  /** The device `init` reported (`cpu`, `cuda:0`); undefined before init. */
  device: string | undefined;

  async init(config: WorkerInitConfig): Promise<InitResult> {
    const result = await this.command("init", { config });
    this.device = result.device;
    return result;
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
  saveWeights(dir: string, dtype?: WeightDtype): Promise<PathResult> {
    return this.command("save_weights", dtype ? { dir, dtype } : { dir });
  }

  /** LoRA: the adapter alone as a PEFT folder (adapter_config.json, adapter_model.safetensors) for /load_lora_adapter. */
  saveAdapter(dir: string): Promise<Result<"save_adapter">> {
    return this.command("save_adapter", { dir });
  }

  saveCheckpoint(dir: string): Promise<PathResult> {
    return this.command("save_checkpoint", { dir });
  }

  loadCheckpoint(dir: string): Promise<PathResult> {
    return this.command("load_checkpoint", { dir });
  }

  /** Rank 0 joins the weight-update group as its rank 0; resolves once every server rank has joined too. */
  initWeightsGroup(fields: RequestFields<"init_weights_group">): Promise<Result<"init_weights_group">> {
    return this.command("init_weights_group", fields);
  }

  /** Every parameter's name, dtype and shape, cut into buckets of at most `bucketBytes`. */
  planWeightBuckets(bucketBytes: number, dtype?: WeightDtype): Promise<WeightBucketPlan> {
    return this.command("plan_weight_buckets", dtype ? { bucket_bytes: bucketBytes, dtype } : { bucket_bytes: bucketBytes });
  }

  /** Broadcasts the named parameters, in order, to the weight-update group (the servers receive them meanwhile). */
  broadcastWeights(names: string[], dtype?: WeightDtype): Promise<Result<"broadcast_weights">> {
    return this.command("broadcast_weights", dtype ? { names, dtype } : { names });
  }

  /** The named parameters as one `serialized_named_tensors` entry (CUDA IPC handles) for /update_weights_from_tensor. */
  serializeWeights(names: string[], dtype?: WeightDtype): Promise<Result<"serialize_weights">> {
    return this.command("serialize_weights", dtype ? { names, dtype } : { names });
  }

  fingerprint(): Promise<FingerprintResult> {
    return this.command("fingerprint", {});
  }

  /** Asks the worker to stop, waits for every rank to exit, and cleans up; kills the group if it lingers. */
  async shutdown(graceMs = 30_000): Promise<void> {
    if (!this.exited && this.socket) {
      try {
        await this.command("shutdown", {});
      } catch {
        // already gone: fall through to the wait and kill below
      }
    }
    await this.waitForExit(graceMs);
    this.dispose();
  }

  /** Kills the worker, torchrun and every rank, at once (SIGKILL to the process group). */
  kill(): void {
    this.child.kill();
    this.dispose();
  }

  get recentLog(): string {
    return this.child.logTail().join("\n");
  }

  /** Serves rank 0's connection from now on; a worker that exits or closes it fails the pending command. */
  private listen(): this {
    void this.child.exited.then(() => this.failPending());
    const socket = this.socket!;
    socket.on("data", (c: Buffer) => this.onData(c));
    socket.on("close", () => this.onSocketClosed());
    // A reset when a rank dies is expected; "close" follows and fails the pending command with the log tail.
    socket.on("error", () => undefined);
    socket.resume();
    return this;
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
      if (this.exited || !this.socket) throw this.crashError(`cannot send ${cmd}: the worker is not running`);
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
    const exit = this.child.exitStatus;
    const how = exit ? ` (${exit.signal ?? `exit code ${exit.code}`})` : "";
    return new WorkerError(`${message}${how}`, this.recentLog, { hint: "the worker's last log lines are attached; see the run's worker log" });
  }

  /** Waits up to `ms` for the worker's top process to exit by itself, then kills the group (a rank may outlive torchrun). */
  private async waitForExit(ms: number): Promise<void> {
    if (!(await this.child.waitForExit(ms))) this.child.kill();
  }

  private dispose(): void {
    this.socket?.destroy();
    this.socket = undefined;
    this.server.close();
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

/** Resolves once rank 0 has connected and sent its first line, the ready event; the rest stays in the socket. */
function rank0Connection(server: net.Server): Promise<Connected> {
  return new Promise((resolve, reject) => {
    server.once("connection", (conn) => {
      let text = "";
      const onData = (chunk: Buffer) => {
        text += chunk.toString("utf8");
        const newline = text.indexOf("\n");
        if (newline < 0) return;
        conn.off("data", onData);
        conn.pause();
        conn.unshift(Buffer.from(text.slice(newline + 1), "utf8"));
        const firstLine = text.slice(0, newline);
        const ready = readyEvent.safeParse(safeJson(firstLine));
        if (!ready.success) reject(new StartupFailure(`the worker's first message is not a ready event: ${firstLine.slice(0, 200)}`));
        else resolve({ socket: conn, worldSize: ready.data.world_size, rank0Pid: ready.data.pid });
      };
      conn.on("data", onData);
    });
  });
}

/**
 * The worker's command line: `python -m torch.distributed.run ... -m agentrl_worker --socket PATH --parent-pid PID`,
 * or for one rank on one node (the default) `python -m agentrl_worker ...` alone: around a world of one, torchrun
 * would only add its own start-up (about 1 s to ready, and a second torch import: bench/worker_startup.py).
 */
export function workerArgs(options: Pick<WorkerStartOptions, "nprocPerNode" | "torchrunArgs">, socketPath: string): string[] {
  const worker = [
    "-m",
    "agentrl_worker",
    "--socket",
    socketPath,
    // Ranks on this machine exit when this process is gone, even after a SIGKILL that leaves no time to clean up.
    "--parent-pid",
    String(process.pid),
  ];
  if ((options.nprocPerNode ?? 1) === 1 && options.torchrunArgs === undefined) return worker;
  return [
    "-m",
    "torch.distributed.run",
    // Without --log-dir, torchrun makes $TMPDIR/torchelastic_XXXX (empty per-rank folders: the ranks' output is not
    // redirected and the worker writes no error file) and never removes it: one left behind by every run. A
    // --log-dir in torchrun_args still wins (the last one counts).
    "--log-dir=/dev/null",
    ...(options.torchrunArgs ?? ["--standalone"]),
    `--nproc_per_node=${options.nprocPerNode ?? 1}`,
    ...worker,
  ];
}
