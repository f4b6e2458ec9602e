/**
 * startInferenceServer: launches an inference server, agentrl's embedded server or SGLang (what `--engine embedded|
 * sglang` chooses), as a supervised child and resolves once it answers /health. `agentrl serve` uses it, and so do
 * `agentrl rollout` / `agentrl train` with `--engine embedded`. startRouter puts the SGLang router in front of several.
 */
import { existsSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { InputError, UsageError } from "../errors.js";
import {
  embeddedLaunchCommand,
  redactArgs,
  routerLaunchCommand,
  sglangLaunchCommand,
  type InferenceServerKind,
  type ServerLaunchOptions,
  type LaunchCommand,
} from "./launch-args.js";
import { startServerProcess, type ServerProcess, type ServerProcessOptions } from "./server-process.js";
import { assertPortFree } from "./port-check.js";
import { torchProcessEnv } from "../torch-threads.js";
import { WORKER_DIR, defaultPythonExecutable } from "../repo-paths.js";

/** How any supervised server (an inference server, the router) is run and waited for. */
export interface ServerRunOptions {
  /** Python interpreter. @default the repository's .venv/bin/python when it exists, else python3 */
  python?: string;
  /** Appends the server's output to this file. */
  logFile?: string;
  /** @default 600 000 (SGLang loads large checkpoints and captures CUDA graphs before it answers) */
  startupTimeoutMs?: number;
  /** Between SIGTERM and SIGKILL when stopping. */
  graceMs?: number;
  onLine?: (line: string) => void;
  signal?: AbortSignal;
  /** Extra environment variables for the server (on top of agentrl's own). */
  env?: Record<string, string>;
}

/** The launch options (`--engine`'s value as `engine`, model, GPUs, ...), with a default host and port. */
export interface StartInferenceServerOptions extends Omit<ServerLaunchOptions, "host" | "port">, ServerRunOptions {
  /** 0 picks a free port. @default 30000 */
  port?: number;
  /** @default 127.0.0.1 */
  host?: string;
}

export interface InferenceServer extends ServerProcess {
  engine: InferenceServerKind;
  /** The command line, API key redacted, for logs. */
  commandLine: string[];
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

/** The embedded server's first stdout line names its URL (needed with --port 0). */
const EMBEDDED_READY = /serving .* on (http:\/\/\S+) \(/;

export async function startInferenceServer(options: StartInferenceServerOptions): Promise<InferenceServer> {
  if (options.engine === "embedded" && !existsSync(path.join(options.model, "config.json"))) {
    // SGLang also takes Hugging Face ids; the embedded server only loads a local folder.
    throw new InputError(`${options.model}: not a model folder (no config.json)`, {
      hint: "pass a Hugging Face model folder; make a tiny one with: python -m agentrl_worker.make_tiny --help",
    });
  }
  // Messages name a server as users chose it (`--engine embedded|sglang`).
  const label = options.engine === "embedded" ? "the embedded engine" : "sglang";
  const host = options.host ?? "127.0.0.1";
  let port = options.port ?? 30000;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be 0-65535, got ${port}`);
  if (port === 0 && options.engine === "sglang") port = await freePort(host === "0.0.0.0" ? "127.0.0.1" : host);
  else if (port !== 0) await assertPortFree(host, port, label);
  const launch: ServerLaunchOptions = { ...options, host, port };
  const command: LaunchCommand =
    options.engine === "embedded"
      ? embeddedLaunchCommand(launch, WORKER_DIR)
      : sglangLaunchCommand(launch);
  const python = options.python ?? defaultPythonExecutable();

  let announced: string | undefined;
  const fixedUrl = port === 0 ? undefined : clientUrl(host, port);
  const server = await startServerProcess({
    ...supervision(options),
    label,
    command: python,
    args: command.args,
    env: { ...(options.engine === "embedded" ? torchProcessEnv({ ...process.env, ...options.env }) : {}), ...options.env, ...command.env },
    url: () => fixedUrl ?? announced,
    // Only the embedded server echoes a launch id; SGLang relies on the port check above.
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
  });
  return Object.assign(server, { engine: options.engine, commandLine: [python, ...redactArgs(command.args)] });
}

export interface StartRouterOptions extends ServerRunOptions {
  workerUrls: readonly string[];
  host?: string;
  port: number;
  policy?: string;
  apiKey?: string;
}

/** The SGLang router in front of several servers, supervised like them. */
export async function startRouter(options: StartRouterOptions): Promise<ServerProcess & { commandLine: string[] }> {
  const host = options.host ?? "127.0.0.1";
  await assertPortFree(host, options.port, "the sglang router");
  const command = routerLaunchCommand({
    workerUrls: options.workerUrls,
    host,
    port: options.port,
    ...(options.policy ? { policy: options.policy } : {}),
    ...(options.apiKey ? { apiKey: options.apiKey } : {}),
  });
  const python = options.python ?? defaultPythonExecutable();
  const router = await startServerProcess({
    ...supervision(options),
    label: "the sglang router",
    command: python,
    args: command.args,
    url: clientUrl(host, options.port),
    ...(options.onLine ? { onLine: options.onLine } : {}),
  });
  return Object.assign(router, { commandLine: [python, ...redactArgs(command.args)] });
}

/** The options the supervisor takes as they are. */
function supervision({ logFile, startupTimeoutMs, graceMs, signal, env }: ServerRunOptions): Partial<ServerProcessOptions> {
  return { logFile, startupTimeoutMs, graceMs, signal, env };
}
