/**
 * Metrics sinks that run as small Python children (agentrl_worker.tb_logger, agentrl_worker.wandb_logger), fed one
 * JSON line per record on stdin. Writing never waits on the child (Node buffers the pipe), and a child that cannot
 * log (its package missing, a failed start) exits with a one-line reason: the run says so once, through `onProblem`,
 * and goes on; metrics.jsonl is written either way.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { VENV_PYTHON, WORKER_DIR } from "../repo-paths.js";

export interface MetricsSink {
  log(record: Record<string, unknown>): void;
  close(): Promise<void>;
}

export interface PythonSinkSpec {
  /** `python -m <module> ...args`. */
  module: string;
  args: string[];
  /** Names the sink in problems: "TensorBoard logging stopped: ...". */
  label: string;
  onProblem: (message: string) => void;
  /** Each line the child prints on stdout. */
  onStdoutLine?: (line: string) => void;
  /** How long close() waits for the child to finish before killing it; it waits as long as it takes when absent. */
  closeTimeoutMs?: number;
}

export function startPythonSink(spec: PythonSinkSpec): MetricsSink {
  const child = spawn(VENV_PYTHON, ["-m", spec.module, ...spec.args], {
    env: { ...process.env, PYTHONPATH: WORKER_DIR },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  let alive = true;
  child.stderr.on("data", (chunk) => (stderr += chunk));
  if (spec.onStdoutLine) createInterface({ input: child.stdout }).on("line", spec.onStdoutLine);
  else child.stdout.resume();
  child.stdin.on("error", () => undefined); // the child may exit first (package missing); the exit handler reports it
  const exited = new Promise<void>((resolve) =>
    child.on("close", (code, signal) => {
      alive = false;
      if (code !== 0 && !killedAtClose) {
        spec.onProblem(`${spec.label} stopped: ${stderr.trim().split("\n").at(-1) || `exit code ${code ?? signal}`}`);
      }
      resolve();
    }),
  );
  child.on("error", (err) => {
    alive = false;
    spec.onProblem(`${spec.label} could not start: ${err.message}`);
  });
  let killedAtClose = false;
  return {
    log(record) {
      if (alive) child.stdin.write(`${JSON.stringify(record)}\n`);
    },
    async close() {
      child.stdin.end();
      if (spec.closeTimeoutMs === undefined || !alive) return exited;
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), spec.closeTimeoutMs)));
      if (await Promise.race([exited.then(() => false), late])) {
        killedAtClose = true;
        child.kill("SIGTERM");
        spec.onProblem(`${spec.label}: still finishing after ${spec.closeTimeoutMs! / 1000} s, stopped`);
        await exited;
      }
      clearTimeout(timer);
    },
  };
}
