/**
 * The trajectory record: one per rollout sample, token for token what the engine saw and sampled, plus everything a
 * person needs to read it (segments with text, tool calls, rewards and their parts, timings). docs/trajectory-format.md
 * describes every field; this file is the single source of the schema, for JSONL and parquet alike.
 */
import { Field, Float32, Float64, Int8, Int32, Int64, List, Schema, Struct, Utf8 } from "apache-arrow";
import { z } from "zod";
import type { WriteOptions } from "./parquet.js";

export const TRAJECTORY_FORMAT_VERSION = 1;

export const SEGMENT_KINDS = ["prompt", "assistant", "tool", "user", "bridge"] as const;
export type SegmentKind = (typeof SEGMENT_KINDS)[number];

/** How a trajectory ended. `completed`: a natural end; `truncated`: a length budget cut it; `aborted`: cancelled
 * (deadline, over-sampling, Ctrl-C); `failed`: an error we could not turn into an observation (server down...). */
export const TRAJECTORY_STATUSES = ["completed", "truncated", "aborted", "failed"] as const;
export type TrajectoryStatus = (typeof TRAJECTORY_STATUSES)[number];

export const segmentSchema = z.object({
  /** prompt | assistant | tool | user | bridge (template tokens between turns, mask 0). */
  kind: z.enum(SEGMENT_KINDS),
  /** Assistant turn number this segment belongs to or follows (0-based). */
  turn: z.number().int(),
  /** Token span [start, end) in response_ids (for kind prompt: in prompt_ids). */
  start: z.number().int(),
  end: z.number().int(),
  text: z.string(),
  /** Tool segments: the tool's name and its arguments as JSON text. */
  tool_name: z.string().nullish(),
  arguments: z.string().nullish(),
  latency_ms: z.number().nullish(),
  /** Tool or parse error, when this segment reports one. */
  error: z.string().nullish(),
  /** Assistant segments: the engine's finish reason for this turn (stop, length, abort). */
  finish_reason: z.string().nullish(),
});
export type TrajectorySegment = z.infer<typeof segmentSchema>;

/**
 * A run of sampled tokens that one policy version produced: [start, end) in response_ids. A generation that a weight
 * update cut and the new weights continued (a partial rollout) has one span per version within its turn.
 */
export const versionSpanSchema = z.object({
  start: z.number().int(),
  end: z.number().int(),
  /** The engine's meta_info.weight_version (a training step's number), null when the server reports none. */
  weight_version: z.string().nullable(),
});
export type VersionSpan = z.infer<typeof versionSpanSchema>;

/**
 * An earlier token sequence of the same episode: an OpenAI-API agent (docs/openai-gateway.md) sent a history that did
 * not extend the record (an edited or dropped message, a summarised context), so a new sequence began. It trains
 * with the episode's reward and advantage, as its own row.
 */
export const contextSegmentSchema = z.object({
  prompt_ids: z.array(z.number().int()),
  response_ids: z.array(z.number().int()),
  response_mask: z.array(z.number().int()),
  response_logprobs: z.array(z.number()),
  /** Its chat messages (JSON text), as `messages`. */
  messages: z.string(),
  /** Why the next request did not extend it. */
  reason: z.string(),
  /** Its own drift check: match, drift, whitespace_only, reasoning_only, skipped. */
  drift: z.string(),
});
export type ContextSegment = z.infer<typeof contextSegmentSchema>;

export const toolCallRecordSchema = z.object({
  /** The assistant turn (0-based) that made the call. */
  turn: z.number().int(),
  name: z.string(),
  /** Arguments as JSON text (as parsed; `{}` when they could not be parsed). */
  arguments: z.string(),
  /** The observation text the model got back (after truncation). */
  response: z.string(),
  latency_ms: z.number(),
  step_reward: z.number().nullish(),
  /** Error kind (timeout, exception, bad_output, unknown_tool, parse error kinds...), null on success. */
  error_kind: z.string().nullish(),
  error: z.string().nullish(),
});
export type ToolCallRecord = z.infer<typeof toolCallRecordSchema>;

export const trajectorySchema = z.object({
  format_version: z.number().int(),
  /** `<data_index>:<sample_index>`: unique within a rollout; what --resume de-duplicates on. */
  id: z.string(),
  data_index: z.number().int(),
  sample_index: z.number().int(),
  /** Shared by the n samples of one prompt (GRPO's uid). */
  group_id: z.string(),
  data_source: z.string(),
  /** The agent loop that ran it (the row's agent_name, else default_agent_loop); absent in older files. */
  agent_loop: z.string().nullish(),
  ground_truth: z.string().nullish(),
  status: z.enum(TRAJECTORY_STATUSES),
  /** Why it ended: stop, length, abort, max_assistant_turns, max_user_turns, response_budget, interaction_done, deadline, over_sample, error. */
  finish_reason: z.string(),
  error: z.string().nullish(),

  prompt_ids: z.array(z.number().int()),
  response_ids: z.array(z.number().int()),
  /** 1 on tokens the engine sampled (trained on), 0 on everything else; aligned with response_ids. */
  response_mask: z.array(z.number().int()),
  /** The engine's logprob of each sampled token; 0 where the mask is 0. */
  response_logprobs: z.array(z.number()),
  /** Log-probs the trainer computed for the same tokens, when a training step filled them in. */
  trainer_logprobs: z.array(z.number()).nullish(),
  segments: z.array(segmentSchema),
  /** Every tool call, in order, with its result, latency and error. */
  calls: z.array(toolCallRecordSchema),
  /** The conversation as chat messages (JSON text), for reading and for the drift check. */
  messages: z.string(),

  reward: z.number(),
  score: z.number(),
  tool_rewards: z.array(z.number()),
  turn_scores: z.array(z.number()),
  /**
   * The tools' calc_reward at the end of the trajectory (JSON text, `{tool_name: score}`, verl's reward_scores), with
   * tool_lifetime: trajectory; null with per-call tools or none. Added to `reward` only with tool_score_reward: sum.
   */
  tool_scores: z.string().nullish(),
  /**
   * Extra reward parts (JSON text, verl's reward_extra_info): what a user's reward module returned next to `score`,
   * and `acc` (the answer is correct), which the built-in scorers report and the accuracy metrics read.
   */
  reward_extra: z.string().nullish(),
  advantage: z.number().nullish(),

  num_turns: z.number().int(),
  assistant_turns: z.number().int(),
  user_turns: z.number().int(),
  tool_calls: z.number().int(),
  tool_errors: z.number().int(),
  parse_errors: z.number().int(),
  /** Drift check of the accumulated tokens against a full template render: match, drift, whitespace_only, reasoning_only, skipped. */
  drift: z.string(),
  drift_detail: z.string().nullish(),

  server: z.string().nullish(),
  /** The engine's weight_version for the last turn generated. */
  weight_version: z.string().nullish(),
  /** Which weight version sampled which response tokens; absent in files written before partial rollouts. */
  version_spans: z.array(versionSpanSchema).nullish(),
  /** Earlier token sequences of this episode, oldest first; absent or empty when the record is one sequence. */
  context_segments: z.array(contextSegmentSchema).nullish(),
  step: z.number().int().nullish(),
  started_at: z.number(),
  gen_ms: z.number(),
  tool_ms: z.number(),
  total_ms: z.number(),
  retries: z.number().int(),
});
export type Trajectory = z.infer<typeof trajectorySchema>;

/**
 * The trajectory's accuracy, 0..1: the `acc` its scorer reported in reward_extra (a boolean, or a number as verl's
 * reward_extra_info allows), else score ≥ 1, the rule for scorers that report none. A shaped reward then does not
 * count as accuracy, and a correct answer counts even when the reward is below 1.
 */
export function trajectoryAcc(t: { score: number; reward_extra?: string | null | undefined }): number {
  if (t.reward_extra) {
    let extra: unknown;
    try {
      extra = JSON.parse(t.reward_extra);
    } catch {
      extra = undefined; // not ours to judge here: inspect shows the text as it is
    }
    const acc = extra !== null && typeof extra === "object" ? (extra as Record<string, unknown>)["acc"] : undefined;
    if (typeof acc === "boolean") return acc ? 1 : 0;
    if (typeof acc === "number" && Number.isFinite(acc)) return acc;
  }
  return t.score >= 1 ? 1 : 0;
}

export function trajectoryKey(dataIndex: number, sampleIndex: number): string {
  return `${dataIndex}:${sampleIndex}`;
}

const f = (name: string, type: ConstructorParameters<typeof Field>[1], nullable = false) => new Field(name, type, nullable);
const str = (name: string, nullable = false) => f(name, new Utf8(), nullable);
const i32 = (name: string, nullable = false) => f(name, new Int32(), nullable);
const f64 = (name: string, nullable = false) => f(name, new Float64(), nullable);
const list = (name: string, element: ConstructorParameters<typeof Field>[1], nullable = false) =>
  f(name, new List(new Field("element", element, false)), nullable);

/**
 * How trajectory parquet is written (parts, the finished file, rewrites): zstd, no dictionaries (parquet.ts's
 * `dictionary` says why), row groups of `rowGroupSize` trajectories.
 */
export const TRAJECTORY_PARQUET = (rowGroupSize: number): WriteOptions => ({ compression: "zstd", rowGroupSize, dictionary: false });

/** The parquet layout of a trajectory: token arrays as list<int32>/list<int8>/list<float32>, segments as structs. */
export const trajectoryArrowSchema = new Schema([
  i32("format_version"),
  str("id"),
  f("data_index", new Int64()),
  i32("sample_index"),
  str("group_id"),
  str("data_source"),
  str("ground_truth", true),
  str("status"),
  str("finish_reason"),
  str("error", true),
  list("prompt_ids", new Int32()),
  list("response_ids", new Int32()),
  list("response_mask", new Int8()),
  list("response_logprobs", new Float32()),
  list("trainer_logprobs", new Float32(), true),
  list(
    "segments",
    new Struct([
      str("kind"),
      i32("turn"),
      i32("start"),
      i32("end"),
      str("text"),
      str("tool_name", true),
      str("arguments", true),
      f64("latency_ms", true),
      str("error", true),
      str("finish_reason", true),
    ]),
  ),
  list(
    "calls",
    new Struct([
      i32("turn"),
      str("name"),
      str("arguments"),
      str("response"),
      f64("latency_ms"),
      f64("step_reward", true),
      str("error_kind", true),
      str("error", true),
    ]),
  ),
  str("messages"),
  f64("reward"),
  f64("score"),
  list("tool_rewards", new Float64()),
  list("turn_scores", new Float64()),
  str("tool_scores", true),
  str("agent_loop", true),
  str("reward_extra", true),
  f64("advantage", true),
  i32("num_turns"),
  i32("assistant_turns"),
  i32("user_turns"),
  i32("tool_calls"),
  i32("tool_errors"),
  i32("parse_errors"),
  str("drift"),
  str("drift_detail", true),
  str("server", true),
  str("weight_version", true),
  list("version_spans", new Struct([i32("start"), i32("end"), str("weight_version", true)]), true),
  list(
    "context_segments",
    new Struct([
      list("prompt_ids", new Int32()),
      list("response_ids", new Int32()),
      list("response_mask", new Int8()),
      list("response_logprobs", new Float32()),
      str("messages"),
      str("reason"),
      str("drift"),
    ]),
    true,
  ),
  i32("step", true),
  f64("started_at"),
  f64("gen_ms"),
  f64("tool_ms"),
  f64("total_ms"),
  i32("retries"),
]);
