/**
 * startFleet: several SGLang servers behind the SGLang router (`agentrl serve --replicas N`), each supervised like a
 * single server.
 */
import { UsageError } from "../errors.js";
import type { ProcessExit } from "../process/index.js";
import { freePort, startInferenceServer, startRouter, type InferenceServer, type StartInferenceServerOptions } from "./inference-server.js";
import { assertPortFree } from "./port-check.js";
import type { ServerProcess } from "./server-process.js";

export interface StartFleetOptions extends StartInferenceServerOptions {
  /** Separate SGLang servers, each on an equal share of `gpus`, behind one sglang router. */
  replicas: number;
  routerPolicy?: string;
}

export interface ServerFleet {
  /** The router's URL: where rollouts send /generate. */
  url: string;
  /** Every server's URL: where weight updates and aborts go (the router does not route them). */
  workerUrls: string[];
  servers: InferenceServer[];
  router: ServerProcess & { commandLine: string[] };
  /** Settles when any member exits (each member is also stopped then by the caller's stop()). */
  exited: Promise<ProcessExit & { label: string }>;
  stop(): Promise<void>;
}

/**
 * Several SGLang servers and the router in front of them: server i listens on port + 1 + i with GPUs
 * gpus[i·k .. (i+1)·k), the router on `port`. If any member fails to start, the ones already up are stopped.
 */
export async function startFleet(options: StartFleetOptions): Promise<ServerFleet> {
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
  const servers: InferenceServer[] = [];
  const stopAll = async (router?: ServerProcess) => {
    await Promise.all([router?.stop(), ...servers.map((server) => server.stop())]);
  };
  try {
    // allSettled, not all: a server still starting when another fails must be stopped too, not left behind.
    const outcomes = await Promise.allSettled(
      Array.from({ length: replicas }, async (_, i) => {
        const server = await startInferenceServer({
          ...options,
          port: port + 1 + i,
          ...(share > 0 ? { gpus: gpus.slice(i * share, (i + 1) * share) } : {}),
          ...(options.logFile ? { logFile: `${options.logFile}.server${i}` } : {}),
        });
        servers.push(server);
        return server;
      }),
    );
    const failed = outcomes.find((outcome): outcome is PromiseRejectedResult => outcome.status === "rejected");
    if (failed) throw failed.reason;
    const started = outcomes.map((outcome) => (outcome as PromiseFulfilledResult<InferenceServer>).value);
    const workerUrls = started.map((server) => server.url);
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
    const members = [...started.map((server, i) => ({ label: `sglang server ${i}`, process: server as ServerProcess })), { label: "the sglang router", process: router as ServerProcess }];
    return {
      url: router.url,
      workerUrls,
      servers: started,
      router,
      exited: Promise.race(members.map(({ label, process }) => process.exited.then((exit) => ({ label, ...exit })))),
      stop: () => stopAll(router),
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
