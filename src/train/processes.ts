/**
 * The processes a training command runs, owned in one place: the embedded engine (`train` with rollout.name embedded),
 * the training worker (torchrun), and the SGLang client that talks to the engine. The engine and the worker each
 * take seconds to start (imports, model loading), so they start side by side; stop() stops whatever started, and the
 * commands call it on every exit path (session.ts).
 */
import { appendFileSync } from "node:fs";
import { AgentrlError } from "../errors.js";
import type { SglangClient } from "../engine/index.js";
import type { WorkerClient, WorkerInitConfig } from "./worker/index.js";

/** What a command uses of the embedded engine it started (src/serve). */
interface EngineProcess {
  readonly url: string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; requested: boolean }>;
  logTail(): string[];
  stop(): Promise<unknown>;
}

export interface EngineSpec {
  model: string;
  logFile: string;
  /** Flags for the embedded engine's command line (--enable-priority-scheduling). */
  extraArgs?: string[];
}

export interface WorkerSpec {
  /** torchrun's shape: ranks per node, nodes, rendezvous flags. */
  trainer: { n_gpus_per_node: number; nnodes: number; torchrun_args: string[] };
  logFile: string;
  init: WorkerInitConfig;
}

export class TrainingProcesses {
  engine: EngineProcess | undefined;
  worker: WorkerClient | undefined;
  client: SglangClient | undefined;

  /**
   * Starts the engine and the worker (each when given), side by side. Both settle before either failure is thrown,
   * so whichever did start is there for stop(). `signal` (Ctrl-C) cancels the engine's start.
   */
  async start(spec: { engine?: EngineSpec | undefined; worker?: WorkerSpec | undefined; signal: AbortSignal }): Promise<void> {
    const [engine, worker] = await Promise.allSettled([
      spec.engine && this.startEngine(spec.engine, spec.signal),
      spec.worker && this.startWorker(spec.worker),
    ]);
    if (engine.status === "rejected") throw engine.reason;
    if (worker.status === "rejected") throw worker.reason;
  }

  private async startEngine(spec: EngineSpec, signal: AbortSignal): Promise<void> {
    const { startInferenceServer } = await import("../serve/index.js");
    const { model, logFile, extraArgs = [] } = spec;
    this.engine = await startInferenceServer({ engine: "embedded", model, port: 0, logFile, signal, extraArgs });
  }

  private async startWorker(spec: WorkerSpec): Promise<void> {
    const { WorkerClient } = await import("./worker/index.js");
    const { trainer } = spec;
    this.worker = await WorkerClient.start({
      nprocPerNode: trainer.n_gpus_per_node,
      ...(trainer.nnodes > 1 || trainer.torchrun_args.length ? { torchrunArgs: [`--nnodes=${trainer.nnodes}`, ...trainer.torchrun_args] } : {}),
      onLog: (line) => appendFileSync(spec.logFile, `${line}\n`),
    });
    await this.worker.init(spec.init);
  }

  /** The client, closed with the processes (after the worker, before the engine). */
  adopt(client: SglangClient): SglangClient {
    this.client = client;
    return client;
  }

  /**
   * Rejects when the embedded engine exits without being asked to, with its last lines and `hint`; never settles
   * otherwise. Raced against the loop, so a dead engine ends the run at once instead of failing every request.
   */
  engineDeath(hint: string): Promise<never> {
    const engine = this.engine;
    if (!engine) return new Promise<never>(() => undefined);
    return engine.exited.then((exit) => {
      if (exit.requested) return new Promise<never>(() => undefined);
      const lastLines = engine.logTail().slice(-15).join("\n");
      throw new AgentrlError(`the embedded engine exited (code ${exit.code ?? exit.signal}); its last lines:\n${lastLines}`, { hint });
    });
  }

  async stop(): Promise<void> {
    await this.worker?.shutdown().catch(() => this.worker?.kill());
    await this.client?.close().catch(() => undefined);
    await this.engine?.stop().catch(() => undefined);
  }
}
