/**
 * The per-step metrics computed on the CLI side from the step's trajectories (rewards, lengths, turns, tool use),
 * under verl's metric names where verl has one (docs/run-folder.md). Losses, KL and gradients come from the worker.
 */
import { trajectoryAcc, type Trajectory } from "../data/trajectory.js";
import { tokenStaleness } from "../data/version-spans.js";
import type { RolloutBatch } from "./rollout.js";

/**
 * Mean, max and min of `values`, the same whatever their order: they are summed smallest first. Trajectories come in
 * the order they finished, which timing decides, and a float sum in another order can differ in its last bit, so two
 * runs with the same seeds logged different means (test/train-demo.test.ts compares them line for line).
 */
function stats(values: number[]): { mean: number; max: number; min: number } {
  if (values.length === 0) return { mean: 0, max: 0, min: 0 };
  let sum = 0;
  let max = -Infinity;
  let min = Infinity;
  for (const v of [...values].sort((a, b) => a - b)) {
    sum += v;
    max = Math.max(max, v);
    min = Math.min(min, v);
  }
  return { mean: sum / values.length, max, min };
}

function put(out: Record<string, number>, prefix: string, values: number[]): void {
  const s = stats(values);
  out[`${prefix}/mean`] = s.mean;
  out[`${prefix}/max`] = s.max;
  out[`${prefix}/min`] = s.min;
}

export function trajectoryMetrics(trajectories: readonly Trajectory[], maxResponseLength: number): Record<string, number> {
  const out: Record<string, number> = {};
  put(out, "critic/score", trajectories.map((t) => t.score));
  put(out, "critic/rewards", trajectories.map((t) => t.reward));
  const lengths = trajectories.map((t) => t.response_ids.length);
  put(out, "response_length", lengths);
  out["response_length/clip_ratio"] = trajectories.length
    ? trajectories.filter((t) => t.finish_reason === "length" || t.finish_reason === "response_budget" || t.response_ids.length >= maxResponseLength).length / trajectories.length
    : 0;
  const turns = stats(trajectories.map((t) => t.assistant_turns));
  out["num_turns/mean"] = turns.mean;
  out["num_turns/max"] = turns.max;
  // The scorer's reported acc (verl's reward_extra_info acc), else score >= 1: see trajectoryAcc.
  out["acc/mean"] = stats(trajectories.map(trajectoryAcc)).mean;
  const calls = trajectories.reduce((a, t) => a + t.tool_calls, 0);
  const toolErrors = trajectories.reduce((a, t) => a + t.tool_errors, 0);
  const parseErrors = trajectories.reduce((a, t) => a + t.parse_errors, 0);
  out["tool/calls_per_traj"] = trajectories.length ? calls / trajectories.length : 0;
  out["tool/call_rate"] = trajectories.length ? trajectories.filter((t) => t.tool_calls > 0).length / trajectories.length : 0;
  out["tool/error_rate"] = calls ? toolErrors / calls : 0;
  out["tool/parse_error_rate"] = calls + parseErrors ? parseErrors / (calls + parseErrors) : 0;
  out["drift/count"] = trajectories.filter((t) => t.drift === "drift").length;
  // An OpenAI-API agent that rewrote its history: its episode trains as several sequences (docs/openai-gateway.md).
  out["drift/segmented_trajectories"] = trajectories.filter((t) => (t.context_segments?.length ?? 0) > 0).length;
  out["drift/context_segments"] = trajectories.reduce((sum, t) => sum + (t.context_segments?.length ?? 0), 0);
  out["mask/empty_count"] = trajectories.filter((t) => !t.response_mask.includes(1)).length;
  out["rollout/failed"] = trajectories.filter((t) => t.status === "failed").length;
  out["rollout/retries"] = trajectories.reduce((a, t) => a + t.retries, 0);
  return out;
}

/**
 * The scoring of a step's rollout, the start of its metrics line: every trajectory's rewards, lengths, turns and tool
 * use, what the batch kept and dropped, and the sampling throughput (sampled tokens per second of generation).
 */
export function batchMetrics(batch: RolloutBatch, maxResponseLength: number, step: number): Record<string, number> {
  const sampledTokens = batch.all.reduce((a, t) => a + t.response_mask.reduce((x, y) => x + y, 0), 0);
  const stale = tokenStaleness(batch.kept, step - 1);
  return {
    "async/token_staleness_mean": stale.mean,
    "async/token_staleness_max": stale.max,
    "async/partial_rollout_frac": stale.partialFraction,
    ...trajectoryMetrics(batch.all, maxResponseLength),
    "batch/trajectories": batch.kept.length,
    "batch/groups": batch.keptGroups,
    "batch/dropped_groups": batch.droppedGroups,
    "batch/gen_rounds": batch.rounds,
    "batch/over_sample_aborted": batch.overSampleAborted,
    "batch/lone_groups_dropped": batch.loneGroups,
    "perf/throughput": sampledTokens / Math.max(batch.seconds, 1e-9),
  };
}

/**
 * Validation metrics: verl's `val-core/<data_source>/reward/mean@1`, accuracy (the scorer's acc, else score >= 1), and
 * pass@k when n > 1: the mean over prompts of the best accuracy among its k samples (with 0/1 accuracies, the share of
 * prompts with at least one correct sample).
 */
export function validationMetrics(trajectories: readonly Trajectory[], n: number): Record<string, number> {
  const out: Record<string, number> = {};
  const bySource = new Map<string, Trajectory[]>();
  for (const t of trajectories) bySource.set(t.data_source, [...(bySource.get(t.data_source) ?? []), t]);
  for (const [source, list] of bySource) {
    const first = list.filter((t) => t.sample_index === 0);
    out[`val-core/${source}/reward/mean@1`] = stats(first.map((t) => t.reward)).mean;
    out[`val-core/${source}/acc/mean@1`] = stats(first.map(trajectoryAcc)).mean;
    if (n > 1) {
      const groups = new Map<string, Trajectory[]>();
      for (const t of list) groups.set(t.group_id, [...(groups.get(t.group_id) ?? []), t]);
      out[`val-core/${source}/reward/pass@${n}`] = stats([...groups.values()].map((g) => Math.max(...g.map(trajectoryAcc)))).mean;
      out[`val-core/${source}/reward/mean@${n}`] = stats(list.map((t) => t.reward)).mean;
    }
  }
  return out;
}
