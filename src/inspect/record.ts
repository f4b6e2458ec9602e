/**
 * What inspect's streaming views (summary, list, --where, --sort) read from a trajectory: a whole Trajectory, or the
 * same record read column by column from parquet (src/inspect/columnar.ts) with token arrays as typed-array views and
 * only the columns the view declared. Each field in fields.ts names the columns it reads, so a projected record
 * always carries what its readers touch.
 */
import type { ToolCallRecord, Trajectory } from "../data/trajectory.js";

type Numbers = ArrayLike<number>;

export type TrajectoryRecord = Omit<
  Trajectory,
  "prompt_ids" | "response_ids" | "response_mask" | "response_logprobs" | "trainer_logprobs" | "calls"
> & {
  prompt_ids: Numbers;
  response_ids: Numbers;
  response_mask: Numbers;
  response_logprobs: Numbers;
  trainer_logprobs?: Numbers | null;
  /** Projected records carry name, latency and error kind; whole ones every field. */
  calls: Array<Pick<ToolCallRecord, "name" | "latency_ms" | "error_kind"> & Partial<ToolCallRecord>>;
};

/** The columns InspectStats.add reads. */
export const SUMMARY_COLUMNS = [
  "id", "data_source", "status", "finish_reason", "reward", "score", "reward_extra", "assistant_turns", "tool_calls", "tool_errors",
  "parse_errors", "drift", "retries", "advantage", "response_ids", "response_mask", "trainer_logprobs", "calls",
  "step", "version_spans", "context_segments",
] as const;

/**
 * The columns InspectStats.addLogprobGap reads. Apart from SUMMARY_COLUMNS because behaviour log-probs are the
 * largest column and only matter when trainer log-probs exist (run folders): rollout files skip decoding them.
 */
export const GAP_COLUMNS = ["id", "response_mask", "response_logprobs", "trainer_logprobs"] as const;

/** The columns a list row reads (src/inspect/list.ts listRow). */
export const LIST_COLUMNS = [
  "id", "group_id", "data_source", "status", "finish_reason", "reward", "advantage", "assistant_turns", "tool_calls",
  "tool_errors", "parse_errors", "response_ids", "response_mask", "drift",
] as const;

export function sampledTokens(t: Pick<TrajectoryRecord, "response_mask">): number {
  let sum = 0;
  for (let i = 0; i < t.response_mask.length; i++) sum += t.response_mask[i]!;
  return sum;
}
