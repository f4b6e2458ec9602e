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

/** The token arrays of one sequence of an episode: the trajectory's own (its main sequence) or a context segment's. */
type TokenSequence = Pick<Trajectory, "prompt_ids" | "response_ids" | "response_mask" | "response_logprobs">;

/** The batch rows of a step, and which row is each trajectory's main sequence (its trainer log-probs, advantage). */
export interface BatchRows {
  rows: TrajectoryRow[];
  mainRows: number[];
}

export interface UpdateResult {
  /**
   * The worker's metrics: log-prob pass, then update (actor/pg_loss, actor/grad_norm, ...), with the parts each timed
   * inside the worker (timing_s/old_log_prob_actor, timing_s/ref, timing_s/forward_backward, timing_s/optimizer, and
   * timing_s/batch_read over both commands).
   */
  metrics: Record<string, number>;
  /** As the CLI sees them: writing the batch file, then each worker command's wall time, messages included. */
  timing: { "timing_s/batch_write": number; "timing_s/old_log_prob": number; "timing_s/update_actor": number };
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
  let t0 = performance.now();
  const { rows, mainRows } = batchRows(kept);
  await writeBatch(batchFile, rows, options.padTokenId);
  const batchWriteSeconds = (performance.now() - t0) / 1000;
  options.reporter.phase(step, "log_prob");
  t0 = performance.now();
  const logProbs = await worker.computeLogProbs(batchFile, logProbFile);
  const oldLogProbSeconds = (performance.now() - t0) / 1000;
  options.reporter.phase(step, "update");
  t0 = performance.now();
  const update = await worker.update(batchFile, logProbs.path);
  const updateSeconds = (performance.now() - t0) / 1000;
  await attachTrainerLogProbs(kept, mainRows, logProbs.path);
  const advantages = update.advantages;
  if (advantages) kept.forEach((t, i) => (t.advantage = advantages[mainRows[i]!]!));
  rmSync(batchFile, { force: true });
  rmSync(logProbFile, { force: true });
  return {
    metrics: workerMetrics(logProbs.metrics, update.metrics),
    timing: { "timing_s/batch_write": batchWriteSeconds, "timing_s/old_log_prob": oldLogProbSeconds, "timing_s/update_actor": updateSeconds },
  };
}

/** Both commands' metrics; each reads the batch file, so their timing_s/batch_read add up. */
export function workerMetrics(logProbs: Record<string, number>, update: Record<string, number>): Record<string, number> {
  const merged = { ...logProbs, ...update };
  const read = "timing_s/batch_read";
  if (read in logProbs || read in update) merged[read] = (logProbs[read] ?? 0) + (update[read] ?? 0);
  return merged;
}

/**
 * One row per sequence: a trajectory's context segments (in order), then its main sequence, all with the trajectory's
 * reward and group. A trajectory with context segments gets an episode id (its index), so the worker computes one
 * advantage for the episode; with none anywhere the batch is exactly one row per trajectory, without episode ids.
 */
export function batchRows(trajectories: readonly Trajectory[]): BatchRows {
  const groupIndex = new Map<string, number>();
  const rows: TrajectoryRow[] = [];
  const mainRows = trajectories.map((t, index) => {
    if (!groupIndex.has(t.group_id)) groupIndex.set(t.group_id, groupIndex.size);
    const groupId = groupIndex.get(t.group_id)!;
    const segments = contextSegments(t);
    const episodeId = segments.length > 0 ? index : undefined;
    for (const sequence of [...segments, t]) rows.push(sequenceRow(sequence, t.reward, groupId, episodeId));
    return rows.length - 1;
  });
  return { rows, mainRows };
}

function contextSegments(t: Trajectory): readonly TokenSequence[] {
  return t.context_segments ?? [];
}

/** Prompt and response tokens, the loss mask over the response, its group for the baseline. */
function sequenceRow(s: TokenSequence, reward: number, groupId: number, episodeId: number | undefined): TrajectoryRow {
  const row: TrajectoryRow = {
    ids: [...s.prompt_ids, ...s.response_ids],
    responseMask: [...new Array<number>(s.prompt_ids.length).fill(0), ...s.response_mask],
    reward,
    groupId,
    rolloutLogProbs: [...new Array<number>(s.prompt_ids.length).fill(0), ...s.response_logprobs],
  };
  if (episodeId !== undefined) row.episodeId = episodeId;
  return row;
}

/** Copies the trainer's log-probs of each trajectory's main-row response tokens into the record, for inspect. */
async function attachTrainerLogProbs(
  trajectories: Trajectory[],
  mainRows: readonly number[],
  file: string,
): Promise<void> {
  const tensors = await readSafetensors(file);
  const old = tensors.old_log_probs;
  if (!old || old.dtype !== "F32") return;
  const width = old.shape[1]!;
  trajectories.forEach((t, i) => {
    const start = mainRows[i]! * width + t.prompt_ids.length;
    t.trainer_logprobs = Array.from(old.data.subarray(start, start + t.response_ids.length));
  });
}
