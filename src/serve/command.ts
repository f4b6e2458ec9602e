/**
 * The `agentrl serve` action: start the inference server `--engine` names, print its URL, forward Ctrl-C / SIGTERM,
 * and exit when it is gone. Exit codes: 0 after a requested stop, 130 when Ctrl-C came during start-up, 1 when the
 * server died by itself or another server answered in its place, 2 for bad flags, a missing model folder or a port
 * something already listens on.
 */
import { ExitError, UsageError } from "../errors.js";
import { noteUnlessQuiet, resolveModelPath } from "../config/hub-model.js";
import { handleInterrupts } from "../interrupt.js";
import { checkExecutable } from "../data/input-file.js";
import { checkOutputPath } from "../data/output-path.js";
import { describeExit, type ProcessExit } from "../process/index.js";
import { ServerStartError } from "./errors.js";
import { startFleet } from "./fleet.js";
import { startInferenceServer } from "./inference-server.js";
import type { LoraServing } from "./launch-args.js";

/** The flags of `agentrl serve` as commander parses them; src/cli/commands/serve.ts declares them. */
export interface ServeFlags {
  engine: string;
  model?: string;
  port: number;
  host: string;
  gpus?: number[];
  tp?: number;
  dp?: number;
  colocated?: boolean;
  apiKey?: string;
  python?: string;
  logFile?: string;
  startupTimeout: number;
  quiet?: boolean;
  replicas?: number;
  loraRank?: number;
  loraTargetModules?: string;
}

function loraServing(maxRank: number, modules: string | undefined): LoraServing {
  const names = (modules ?? "all-linear").split(",").map((m) => m.trim()).filter(Boolean);
  return { maxRank, targetModules: names.length === 1 && names[0] === "all-linear" ? "all-linear" : names };
}

/** One inference server, or several SGLang servers behind the router: what serve waits on and stops. */
interface Running {
  url: string;
  exited: Promise<ProcessExit>;
  stop(): Promise<void>;
  logTail(): string[];
  what: string;
}

export async function runServeCommand(flags: ServeFlags, serverArgs: readonly string[]): Promise<void> {
  if (flags.engine !== "embedded" && flags.engine !== "sglang") {
    throw new UsageError(`--engine must be embedded or sglang, got '${flags.engine}'`);
  }
  if (!flags.model) throw new UsageError("serve needs --model DIR");
  const model = await resolveModelPath(flags.model, "--model", noteUnlessQuiet(flags));
  // Before the server starts: a log file that cannot be written would fail (or crash) only once it runs.
  if (flags.logFile) await checkOutputPath(flags.logFile, "file");
  // A path given as --python is checked here: a missing interpreter is the user's input, not an engine that failed.
  if (flags.python?.includes("/")) await checkExecutable(flags.python, "--python");
  const apiKey = flags.apiKey ?? process.env.SGLANG_API_KEY;
  const showLines = !flags.quiet && !flags.logFile;

  const startup = new AbortController();
  let running: Running | undefined;
  // The one Ctrl-C handler: the first signal stops the server (SIGTERM even for Ctrl-C: both servers shut down
  // cleanly on it, while SIGINT makes Python print a traceback); a second one quits at once.
  const interrupt = handleInterrupts("stopping the engine");
  const stopping = () => interrupt.signal.aborted;
  interrupt.signal.addEventListener("abort", () => {
    if (running) void running.stop();
    else startup.abort();
  });
  try {
    const common = {
      engine: flags.engine,
      model,
      port: flags.port,
      host: flags.host,
      ...(flags.gpus ? { gpus: flags.gpus } : {}),
      ...(flags.tp !== undefined ? { tpSize: flags.tp } : {}),
      ...(flags.dp !== undefined ? { dpSize: flags.dp } : {}),
      ...(flags.colocated ? { colocated: true } : {}),
      ...(flags.loraRank !== undefined ? { lora: loraServing(flags.loraRank, flags.loraTargetModules) } : {}),
      ...(apiKey ? { apiKey } : {}),
      ...(flags.python ? { python: flags.python } : {}),
      ...(flags.logFile ? { logFile: flags.logFile } : {}),
      extraArgs: serverArgs,
      startupTimeoutMs: flags.startupTimeout * 1000,
      ...(showLines ? { onLine: (line: string) => process.stderr.write(`${line}\n`) } : {}),
      signal: startup.signal,
    } as const;
    try {
      if ((flags.replicas ?? 1) > 1) {
        const fleet = await startFleet({ ...common, replicas: flags.replicas! });
        running = { url: fleet.url, exited: fleet.exited, stop: () => fleet.stop(), logTail: () => [], what: `sglang router over ${fleet.workerUrls.join(", ")}` };
      } else {
        const server = await startInferenceServer(common);
        running = { url: server.url, exited: server.exited, stop: () => server.stop("SIGTERM").then(() => undefined), logTail: () => server.logTail(), what: `${flags.engine} (process group ${server.pid})` };
      }
    } catch (err) {
      if (err instanceof ServerStartError && err.stoppedDuringStartup) throw new ExitError(130, "stopped during start-up");
      if (err instanceof ServerStartError && !showLines && err.logTail) process.stderr.write(`${err.logTail}\n`);
      throw err;
    }
    if (stopping()) void running.stop();
    process.stdout.write(`${running.url}\n`);
    process.stderr.write(`agentrl serve: ${running.what} ready at ${running.url}; Ctrl-C stops it\n`);
    const exit = await running.exited;
    if (exit.requested || stopping()) {
      await running.stop();
      process.stderr.write("agentrl serve: the engine stopped\n");
      return;
    }
    await running.stop();
    if (!showLines) process.stderr.write(`${running.logTail().join("\n")}\n`);
    throw new ServerStartError(`the ${flags.engine} engine exited by itself (${describeExit(exit)})`, running.logTail().join("\n"));
  } finally {
    interrupt.dispose();
  }
}
