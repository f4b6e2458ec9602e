/**
 * The trackers trainer.logger names besides the console: TensorBoard and wandb, each a Python child fed the metrics
 * records (python-sink.ts). Started after the run folder is prepared, closed when the run ends, whatever its outcome.
 */
import path from "node:path";
import type { Trajectory } from "../data/trajectory.js";
import type { TrainConfig } from "./config.js";
import type { PreparedRun } from "./session.js";
import type { RunDir } from "./run-dir.js";
import type { MetricsSink } from "./python-sink.js";

export interface Trackers {
  /** Every metrics record written to metrics.jsonl. */
  onMetrics(record: Record<string, unknown>): void;
  /** Each validation's trajectories (wandb's table of trainer.log_val_generations samples). */
  onValidation(step: number, trajectories: readonly Trajectory[]): void;
  close(): Promise<void>;
}

/** undefined when trainer.logger names no tracker; `note` says once what a tracker could not do. */
export async function startTrackers(
  config: TrainConfig,
  runDir: RunDir,
  prepared: PreparedRun,
  note: (message: string) => void,
): Promise<Trackers | undefined> {
  const { logger, project_name: project, experiment_name: name, log_val_generations: samples } = config.trainer;
  const sinks: MetricsSink[] = [];
  if (logger.includes("tensorboard")) {
    const { startTensorboard } = await import("./tensorboard.js");
    sinks.push(startTensorboard(path.join(runDir.root, "tensorboard"), `${project}/${name}`, note));
  }
  let onValidation: Trackers["onValidation"] = () => undefined;
  if (logger.includes("wandb")) {
    const { startWandb } = await import("./wandb.js");
    // Continuing from a checkpoint continues the wandb run; a run started over (no checkpoint yet) is a new one.
    const wandb = startWandb({ root: runDir.root, project, name, continueRun: prepared.resumeState !== undefined, config }, note);
    sinks.push(wandb);
    if (samples > 0) onValidation = (step, trajectories) => wandb.valGenerations(step, trajectories, samples);
  }
  if (sinks.length === 0) return undefined;
  return {
    onMetrics: (record) => sinks.forEach((sink) => sink.log(record)),
    onValidation,
    close: async () => void (await Promise.all(sinks.map((sink) => sink.close()))),
  };
}
