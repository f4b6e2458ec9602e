/**
 * Runs the CLI's `main` (src/cli/index.ts) inside the test process: the same commander program, the same exit codes
 * and the same stdout and stderr text as `runCli`, without a Node start-up and a module load per call (about 0.5 to
 * 1 s of CPU each for a command that reads parquet). For test files that make many checks of a pure-read command's
 * logic (inspect, preprocess errors); they keep `runCli` for what only a real process shows (its exit status, a
 * terminal, the built bundle), at least once per behaviour a user relies on.
 *
 * While a call runs, process.stdout and process.stderr are captured and are not terminals (as for a child on pipes:
 * no colour unless FORCE_COLOR, no pager, $COLUMNS for the width), and the environment is the test's plus NO_COLOR=1
 * plus `env`, as for runCli (a value of undefined removes a variable). Calls run one at a time.
 */
import { main } from "../../src/cli/index.js";
import { CLI, type CliResult } from "./cli.js";

let queue: Promise<unknown> = Promise.resolve();

export function runCliInProcess(args: string[], options: { env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> {
  const run = queue.then(() => runNow(args, { NO_COLOR: "1", ...options.env }));
  queue = run.catch(() => undefined);
  return run;
}

async function runNow(args: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  const savedEnv = Object.fromEntries(Object.keys(env).map((key) => [key, process.env[key]]));
  const streams = [process.stdout, process.stderr] as const;
  const savedWrite = streams.map((stream) => stream.write);
  const savedTty = streams.map((stream) => Object.getOwnPropertyDescriptor(stream, "isTTY"));
  const text = ["", ""];
  const setEnv = (values: NodeJS.ProcessEnv) => {
    for (const [key, value] of Object.entries(values)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  };
  setEnv(env);
  streams.forEach((stream, i) => {
    Object.defineProperty(stream, "isTTY", { value: false, configurable: true, writable: true });
    stream.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      text[i] += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
      const callback = rest.find((arg) => typeof arg === "function") as (() => void) | undefined;
      if (callback) queueMicrotask(callback);
      return true;
    }) as typeof stream.write;
  });
  try {
    const code = await main([process.execPath, CLI, ...args]);
    return { code, stdout: text[0]!, stderr: text[1]! };
  } finally {
    streams.forEach((stream, i) => {
      stream.write = savedWrite[i]!;
      if (savedTty[i]) Object.defineProperty(stream, "isTTY", savedTty[i]!);
      else delete (stream as { isTTY?: boolean }).isTTY;
    });
    setEnv(savedEnv);
  }
}
