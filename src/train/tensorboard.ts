/**
 * TensorBoard logging: a small Python child (agentrl_worker.tb_logger) fed one metrics record per line, writing
 * event files under runs/<name>/tensorboard. If the tensorboard package is missing the child exits at once and the
 * run says so; metrics.jsonl is written either way.
 */
import { spawn } from "node:child_process";
import { VENV_PYTHON, WORKER_DIR } from "../repo-paths.js";

export interface MetricsSink {
  log(record: Record<string, unknown>): void;
  close(): Promise<void>;
}

/**
 * `runName` is `<trainer.project_name>/<trainer.experiment_name>`, written once as the text summary `run`.
 * The event files go to `logDir`, or to $TENSORBOARD_DIR when set, as in verl.
 */
export function startTensorboard(logDir: string, runName: string, onProblem: (message: string) => void): MetricsSink {
  const child = spawn(VENV_PYTHON, ["-m", "agentrl_worker.tb_logger", process.env.TENSORBOARD_DIR || logDir, runName], {
    env: { ...process.env, PYTHONPATH: WORKER_DIR },
    stdio: ["pipe", "ignore", "pipe"],
  });
  let stderr = "";
  let alive = true;
  child.stderr.on("data", (chunk) => (stderr += chunk));
  child.stdin.on("error", () => undefined); // the child may exit first (package missing); the exit handler reports it
  const exited = new Promise<void>((resolve) =>
    child.on("close", (code) => {
      alive = false;
      if (code !== 0) onProblem(`TensorBoard logging stopped: ${stderr.trim().split("\n").at(-1) ?? `exit code ${code}`}`);
      resolve();
    }),
  );
  child.on("error", (err) => {
    alive = false;
    onProblem(`TensorBoard logging could not start: ${err.message}`);
  });
  return {
    log(record) {
      if (alive) child.stdin.write(`${JSON.stringify(record)}\n`);
    },
    async close() {
      child.stdin.end();
      await exited;
    },
  };
}
