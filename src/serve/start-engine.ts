/**
 * startEngine: launches the embedded engine or SGLang as a managed child and resolves once it answers /health.
 * `agentrl serve` uses it, and so can `agentrl rollout` / `agentrl train` (`--engine embedded`).
 */
import { existsSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { InputError, UsageError } from "../errors.js";
import {
  embeddedLaunchCommand,
  redactArgs,
  routerLaunchCommand,
  sglangLaunchCommand,
  type EngineKind,
  type EngineLaunchOptions,
  type LaunchCommand,
} from "./launch-args.js";
import { startManagedProcess, type ManagedProcess } from "./managed-process.js";
import { assertPortFree } from "./port-check.js";
import { torchThreadEnv } from "../torch-threads.js";

/** The package root: dist/serve/ or src/serve/ sit two levels below it. */
const PACKAGE_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

export interface StartEngineOptions {
  engine: EngineKind;
  model: string;
  /** 0 picks a free port. @default 30000 */
  port?: number;
  /** @default 127.0.0.1 */
  host?: string;
  gpus?: readonly number[];
  tpSize?: number;
  dpSize?: number;
  colocated?: boolean;
  apiKey?: string;
  extraArgs?: readonly string[];
  /** Appends the engine's output to this file. */
  logFile?: string;
  /** Python interpreter. @default the repository's .venv/bin/python when it exists, else python3 */
  python?: string;
  /** @default 600 000 (SGLang loads large checkpoints and captures CUDA graphs before it answers) */
  startupTimeoutMs?: number;
  graceMs?: number;
  onLine?: (line: string) => void;
  signal?: AbortSignal;
  /** Extra environment variables for the engine (on top of agentrl's own). */
  env?: Record<string, string>;
}

export interface ManagedEngine extends ManagedProcess {
  engine: EngineKind;
  /** The command line, API key redacted, for logs. */
  commandLine: string[];
}

export function defaultPython(): string {
  const venv = path.join(PACKAGE_ROOT, ".venv", "bin", "python");
  return existsSync(venv) ? venv : "python3";
}

/** A port nobody listens on right now (SGLang cannot be asked for port 0). */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

/** The URL a client uses: a wildcard bind address is reached on loopback. */
export function clientUrl(host: string, port: number): string {
  const reachable = host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" ? "::1" : host;
  return `http://${reachable.includes(":") ? `[${reachable}]` : reachable}:${port}`;
}

/** The embedded engine's first stdout line names its URL (needed with --port 0). */
const EMBEDDED_READY = /serving .* on (http:\/\/\S+) \(/;

export async function startEngine(options: StartEngineOptions): Promise<ManagedEngine> {
  if (options.engine === "embedded" && !existsSync(path.join(options.model, "config.json"))) {
    // SGLang also takes Hugging Face ids; the embedded engine only loads a local folder.
    throw new InputError(`${options.model}: not a model folder (no config.json)`, {
      hint: "pass a Hugging Face model folder; make a tiny one with: python -m agentrl_worker.make_tiny --help",
    });
  }
  const host = options.host ?? "127.0.0.1";
  let port = options.port ?? 30000;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be 0-65535, got ${port}`);
  if (port === 0 && options.engine === "sglang") port = await freePort(host === "0.0.0.0" ? "127.0.0.1" : host);
  else if (port !== 0) await assertPortFree(host, port, options.engine === "embedded" ? "the embedded engine" : "sglang");
  const launch: EngineLaunchOptions = {
    engine: options.engine,
    model: options.model,
    host,
    port,
    ...(options.gpus ? { gpus: options.gpus } : {}),
    ...(options.tpSize !== undefined ? { tpSize: options.tpSize } : {}),
    ...(options.dpSize !== undefined ? { dpSize: options.dpSize } : {}),
    ...(options.colocated ? { colocated: true } : {}),
    ...(options.apiKey ? { apiKey: options.apiKey } : {}),
    ...(options.extraArgs ? { extraArgs: options.extraArgs } : {}),
  };
  const command: LaunchCommand =
    options.engine === "embedded"
      ? embeddedLaunchCommand(launch, path.join(PACKAGE_ROOT, "worker"))
      : sglangLaunchCommand(launch);
  const python = options.python ?? defaultPython();

  let announced: string | undefined;
  const fixedUrl = port === 0 ? undefined : clientUrl(host, port);
  const managed = await startManagedProcess({
    label: options.engine === "embedded" ? "the embedded engine" : "sglang",
    command: python,
    args: command.args,
    env: { ...(options.engine === "embedded" ? torchThreadEnv({ ...process.env, ...options.env }) : {}), ...options.env, ...command.env },
    url: () => fixedUrl ?? announced,
    // Only the embedded engine echoes a launch id; SGLang relies on the port check above.
    echoesLaunchId: options.engine === "embedded",
    onLine: (line) => {
      const match = EMBEDDED_READY.exec(line);
      if (match && announced === undefined) {
        // Keep the announced port but reach a wildcard bind on loopback.
        const announcedUrl = new URL(match[1]!);
        announced = clientUrl(host, Number(announcedUrl.port));
      }
      options.onLine?.(line);
    },
    ...(options.startupTimeoutMs !== undefined ? { startupTimeoutMs: options.startupTimeoutMs } : {}),
    ...(options.graceMs !== undefined ? { graceMs: options.graceMs } : {}),
    ...(options.logFile ? { logFile: options.logFile } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  return Object.assign(managed, { engine: options.engine, commandLine: [python, ...redactArgs(command.args)] });
}

export interface StartRouterOptions {
  workerUrls: readonly string[];
  host?: string;
  port: number;
  policy?: string;
  apiKey?: string;
  python?: string;
  logFile?: string;
  startupTimeoutMs?: number;
  onLine?: (line: string) => void;
  signal?: AbortSignal;
  env?: Record<string, string>;
}

/** The SGLang router in front of several servers, managed like an engine. */
export async function startRouter(options: StartRouterOptions): Promise<ManagedProcess & { commandLine: string[] }> {
  const host = options.host ?? "127.0.0.1";
  await assertPortFree(host, options.port, "the sglang router");
  const command = routerLaunchCommand({
    workerUrls: options.workerUrls,
    host,
    port: options.port,
    ...(options.policy ? { policy: options.policy } : {}),
    ...(options.apiKey ? { apiKey: options.apiKey } : {}),
  });
  const python = options.python ?? defaultPython();
  const managed = await startManagedProcess({
    label: "the sglang router",
    command: python,
    args: command.args,
    ...(options.env ? { env: options.env } : {}),
    url: clientUrl(host, options.port),
    ...(options.startupTimeoutMs !== undefined ? { startupTimeoutMs: options.startupTimeoutMs } : {}),
    ...(options.logFile ? { logFile: options.logFile } : {}),
    ...(options.onLine ? { onLine: options.onLine } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  return Object.assign(managed, { commandLine: [python, ...redactArgs(command.args)] });
}

export interface StartFleetOptions extends StartEngineOptions {
  /** Separate SGLang servers, each on an equal share of `gpus`, behind one sglang router. */
  replicas: number;
  routerPolicy?: string;
}

export interface ManagedFleet {
  /** The router's URL: where rollouts send /generate. */
  url: string;
  /** Every server's URL: where weight updates and aborts go (the router does not route them). */
  workerUrls: string[];
  engines: ManagedEngine[];
  router: ManagedProcess & { commandLine: string[] };
  /** Settles when any member exits (each member is also stopped then by the caller's stop()). */
  exited: Promise<{ label: string; code: number | null; signal: NodeJS.Signals | null; requested: boolean }>;
  stop(): Promise<void>;
}

/**
 * Several SGLang servers and the router in front of them: server i listens on port + 1 + i with GPUs
 * gpus[i·k .. (i+1)·k), the router on `port`. If any member fails to start, the ones already up are stopped.
 */
export async function startFleet(options: StartFleetOptions): Promise<ManagedFleet> {
  if (options.engine !== "sglang") throw new UsageError("--replicas needs --engine sglang");
  const replicas = options.replicas;
  const gpus = options.gpus ?? [];
  if (gpus.length > 0 && gpus.length % replicas !== 0) {
    throw new UsageError(`--gpus lists ${gpus.length} GPUs, which --replicas ${replicas} does not divide`);
  }
  const share = gpus.length / replicas;
  const host = options.host ?? "127.0.0.1";
  const port = options.port === undefined || options.port === 0 ? await freePort(host === "0.0.0.0" ? "127.0.0.1" : host) : options.port;
  // The router starts last, after the servers have loaded their models: find out now that its port is taken.
  await assertPortFree(host, port, "the sglang router");
  const engines: ManagedEngine[] = [];
  const stopAll = async (router?: ManagedProcess) => {
    await Promise.all([router?.stop(), ...engines.map((engine) => engine.stop())]);
  };
  try {
    // allSettled, not all: a server still starting when another fails must be stopped too, not left behind.
    const outcomes = await Promise.allSettled(
      Array.from({ length: replicas }, async (_, i) => {
        const engine = await startEngine({
          ...options,
          port: port + 1 + i,
          ...(share > 0 ? { gpus: gpus.slice(i * share, (i + 1) * share) } : {}),
          ...(options.logFile ? { logFile: `${options.logFile}.server${i}` } : {}),
        });
        engines.push(engine);
        return engine;
      }),
    );
    const failed = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === "rejected");
    if (failed) throw failed.reason;
    const started = outcomes.map((outcome) => (outcome as PromiseFulfilledResult<ManagedEngine>).value);
    const workerUrls = started.map((engine) => engine.url);
    const router = await startRouter({
      workerUrls,
      host,
      port,
      ...(options.routerPolicy ? { policy: options.routerPolicy } : {}),
      ...(options.apiKey ? { apiKey: options.apiKey } : {}),
      ...(options.python ? { python: options.python } : {}),
      ...(options.logFile ? { logFile: `${options.logFile}.router` } : {}),
      ...(options.startupTimeoutMs !== undefined ? { startupTimeoutMs: options.startupTimeoutMs } : {}),
      ...(options.onLine ? { onLine: options.onLine } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.env ? { env: options.env } : {}),
    });
    const members = [...started.map((engine, i) => ({ label: `sglang server ${i}`, process: engine as ManagedProcess })), { label: "the sglang router", process: router as ManagedProcess }];
    return {
      url: router.url,
      workerUrls,
      engines: started,
      router,
      exited: Promise.race(members.map(({ label, process }) => process.exited.then((exit) => ({ label, ...exit })))),
      stop: () => stopAll(router),
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
