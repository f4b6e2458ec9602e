/**
 * TensorBoard logging: a small Python child (agentrl_worker.tb_logger) fed one metrics record per line, writing
 * event files under runs/<name>/tensorboard. If the tensorboard package is missing the child exits at once and the
 * run says so; metrics.jsonl is written either way.
 */
import { startPythonSink, type MetricsSink } from "./python-sink.js";

export type { MetricsSink } from "./python-sink.js";

/**
 * `runName` is `<trainer.project_name>/<trainer.experiment_name>`, written once as the text summary `run`.
 * The event files go to `logDir`, or to $TENSORBOARD_DIR when set, as in verl.
 */
export function startTensorboard(logDir: string, runName: string, onProblem: (message: string) => void): MetricsSink {
  return startPythonSink({
    module: "agentrl_worker.tb_logger",
    args: [process.env.TENSORBOARD_DIR || logDir, runName],
    label: "TensorBoard logging",
    onProblem,
  });
}
