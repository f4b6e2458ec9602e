/**
 * The `agentrl serve` action: start the engine, print its URL, forward Ctrl-C / SIGTERM, and exit when it is gone.
 * Exit codes: 0 after a requested stop, 130 when Ctrl-C came during start-up, 1 when the engine died by itself or
 * another server answered in its place, 2 for bad flags, a missing model folder or a port something already listens on.
 */
import { ExitError, UsageError } from "../errors.js";
import type { ServeFlags } from "../cli/commands/serve.js";
import { checkOutputPath } from "../data/output-path.js";
import { EngineStartError } from "./errors.js";
import { startEngine, startFleet } from "./start-engine.js";

/** One engine, or several SGLang servers behind the router: what serve waits on and stops. */
interface Running {
  url: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; requested: boolean }>;
  stop(): Promise<void>;
  logTail(): string[];
  what: string;
}

export async function runServeCommand(flags: ServeFlags, engineArgs: readonly string[]): Promise<void> {
  if (flags.engine !== "embedded" && flags.engine !== "sglang") {
    throw new UsageError(`--engine must be embedded or sglang, got '${flags.engine}'`);
  }
  if (!flags.model) throw new UsageError("serve needs --model DIR");
  // Before the engine starts: a log file that cannot be written would fail (or crash) only once it runs.
  if (flags.logFile) await checkOutputPath(flags.logFile, "file");
  const apiKey = flags.apiKey ?? process.env.SGLANG_API_KEY;
  const showLines = !flags.quiet && !flags.logFile;

  const startup = new AbortController();
  let running: Running | undefined;
  let stopping: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = signal;
    process.stderr.write(`\nagentrl serve: ${signal}, stopping the engine...\n`);
    // SIGTERM even for Ctrl-C: both engines shut down cleanly on it, while SIGINT makes Python print a traceback.
    if (running) void running.stop();
    else startup.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    const common = {
      engine: flags.engine,
      model: flags.model,
      port: flags.port,
      host: flags.host,
      ...(flags.gpus ? { gpus: flags.gpus } : {}),
      ...(flags.tp !== undefined ? { tpSize: flags.tp } : {}),
      ...(flags.dp !== undefined ? { dpSize: flags.dp } : {}),
      ...(flags.colocated ? { colocated: true } : {}),
      ...(apiKey ? { apiKey } : {}),
      ...(flags.python ? { python: flags.python } : {}),
      ...(flags.logFile ? { logFile: flags.logFile } : {}),
      extraArgs: engineArgs,
      startupTimeoutMs: flags.startupTimeout * 1000,
      ...(showLines ? { onLine: (line: string) => process.stderr.write(`${line}\n`) } : {}),
      signal: startup.signal,
    } as const;
    try {
      if ((flags.replicas ?? 1) > 1) {
        const fleet = await startFleet({ ...common, replicas: flags.replicas! });
        running = { url: fleet.url, exited: fleet.exited, stop: () => fleet.stop(), logTail: () => [], what: `sglang router over ${fleet.workerUrls.join(", ")}` };
      } else {
        const engine = await startEngine(common);
        running = { url: engine.url, exited: engine.exited, stop: () => engine.stop("SIGTERM").then(() => undefined), logTail: engine.logTail, what: `${flags.engine} (process group ${engine.pid})` };
      }
    } catch (err) {
      if (err instanceof EngineStartError && err.stoppedDuringStartup) throw new ExitError(130, "stopped during start-up");
      if (err instanceof EngineStartError && !showLines && err.logTail) process.stderr.write(`${err.logTail}\n`);
      throw err;
    }
    if (stopping) void running.stop();
    process.stdout.write(`${running.url}\n`);
    process.stderr.write(`agentrl serve: ${running.what} ready at ${running.url}; Ctrl-C stops it\n`);
    const exit = await running.exited;
    if (exit.requested || stopping) {
      await running.stop();
      process.stderr.write("agentrl serve: the engine stopped\n");
      return;
    }
    await running.stop();
    if (!showLines) process.stderr.write(`${running.logTail().join("\n")}\n`);
    const how = exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code}`;
    throw new EngineStartError(`the ${flags.engine} engine exited by itself (${how})`, running.logTail().join("\n"));
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
