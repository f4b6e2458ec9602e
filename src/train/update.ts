/**
 * The update stage: the step's trajectories as one batch file, the worker's log-prob pass, then its update. All the
 * training math (advantages, losses, KL, the optimizer step) is the worker's (worker/agentrl_worker/algos.py). Each
 * trajectory then records the trainer's log-probs of its response (inspect's gap view) and its advantage.
 */
import path from "node:path";
import { rmSync } from "node:fs";
import type { Trajectory } from "../data/trajectory.js";
import { readSafetensors, writeBatch, type TrajectoryRow, type WorkerClient } from "./worker/index.js";
import type { TrainReporter } from "./reporter.js";

export interface UpdateResult {
  /** The worker's metrics: log-prob pass, then update (actor/pg_loss, actor/grad_norm, ...). */
  metrics: Record<string, number>;
  timing: { "timing_s/old_log_prob": number; "timing_s/update_actor": number };
}

export async function updatePolicy(
  step: number,
  kept: Trajectory[],
  worker: WorkerClient,
  options: { scratchDir: string; padTokenId: number; reporter: TrainReporter },
): Promise<UpdateResult> {
  // The scratch file names tell a killed run's phase (test/train-faults.test.ts): batch-N before the log-prob pass,
  // logprobs-N after it.
  const batchFile = path.join(options.scratchDir, `batch-${step}.safetensors`);
  const logProbFile = path.join(options.scratchDir, `logprobs-${step}.safetensors`);
  await writeBatch(batchFile, batchRows(kept), options.padTokenId);
  options.reporter.phase(step, "log_prob");
  let t0 = performance.now();
  const logProbs = await worker.computeLogProbs(batchFile, logProbFile);
  const oldLogProbSeconds = (performance.now() - t0) / 1000;
  options.reporter.phase(step, "update");
  t0 = performance.now();
  const update = await worker.update(batchFile, logProbs.path);
  const updateSeconds = (performance.now() - t0) / 1000;
  await attachTrainerLogProbs(kept, logProbs.path);
  update.advantages?.forEach((advantage, row) => {
    kept[row]!.advantage = advantage;
  });
  rmSync(batchFile, { force: true });
  rmSync(logProbFile, { force: true });
  return {
    metrics: { ...logProbs.metrics, ...update.metrics },
    timing: { "timing_s/old_log_prob": oldLogProbSeconds, "timing_s/update_actor": updateSeconds },
  };
}

/** One row per trajectory: prompt and response tokens, the loss mask over the response, its group for the baseline. */
function batchRows(trajectories: readonly Trajectory[]): TrajectoryRow[] {
  const groupIndex = new Map<string, number>();
  return trajectories.map((t) => {
    if (!groupIndex.has(t.group_id)) groupIndex.set(t.group_id, groupIndex.size);
    return {
      ids: [...t.prompt_ids, ...t.response_ids],
      responseMask: [...new Array<number>(t.prompt_ids.length).fill(0), ...t.response_mask],
      reward: t.reward,
      groupId: groupIndex.get(t.group_id)!,
      rolloutLogProbs: [...new Array<number>(t.prompt_ids.length).fill(0), ...t.response_logprobs],
    };
  });
}

/** Copies the trainer's log-probs of each trajectory's response tokens into the record, for inspect's gap view. */
async function attachTrainerLogProbs(trajectories: Trajectory[], file: string): Promise<void> {
  const tensors = await readSafetensors(file);
  const old = tensors.old_log_probs;
  if (!old || old.dtype !== "F32") return;
  const width = old.shape[1]!;
  trajectories.forEach((t, row) => {
    const start = row * width + t.prompt_ids.length;
    t.trainer_logprobs = Array.from(old.data.subarray(start, start + t.response_ids.length));
  });
}
