/**
 * The trajectory record: one per rollout sample, token for token what the engine saw and sampled, plus everything a
 * person needs to read it (segments with text, tool calls, rewards and their parts, timings). docs/trajectory-format.md
 * describes every field; this file is the single source of the schema, for JSONL and parquet alike.
 */
import { Field, Float32, Float64, Int8, Int32, Int64, List, Schema, Struct, Utf8, type DataType } from "apache-arrow";
import { z } from "zod";
import { InputError } from "../errors.js";
import { formatIssues } from "../zod-issues.js";
import type { WriteOptions } from "./parquet.js";
import { fromJsonText, storedMessages, storedSegmentArguments, storedToolScores } from "./trajectory-encoding.js";

/**
 * 2: messages, reward_extra, tool_scores, drift_detail and tool-call arguments are JSON values (nested arrow types in
 * parquet); 1 held them as JSON text. Readers take both (trajectory-encoding.ts).
 */
export const TRAJECTORY_FORMAT_VERSION = 2;

/** A JSON object with any keys (reward extras, tool-call arguments). */
const jsonObject = z.record(z.string(), z.unknown());

/** A field stored as JSON text before format 2: the text is parsed, then `schema` validates the value. */
const fromText = <T extends z.ZodType>(schema: T) => z.preprocess(fromJsonText, schema);

/** Tool-call arguments: the object the model's call held (`{}` when it could not be parsed); JSON text in format 1. */
const callArguments = fromText(jsonObject);

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
  /** Tool segments: the tool's name (names, comma-separated) and its arguments (a list of them for several calls). */
  tool_name: z.string().nullish(),
  arguments: z.preprocess(storedSegmentArguments, z.union([jsonObject, z.array(jsonObject)]).nullish()),
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
 * A chat message of the record, in OpenAI's shape (role, content, tool_calls with function name and arguments,
 * tool_call_id, name, reasoning_content), other keys kept. Arguments are an object when they are JSON of one. Nulls
 * pass where a custom agent loop may leave them: the writer does not validate, and what it wrote must read back.
 */
export const recordMessageSchema = z.looseObject({
  role: z.string(),
  content: z.union([z.string(), z.null(), z.array(z.unknown())]).optional(),
  tool_calls: z
    .array(
      z.looseObject({
        id: z.string().nullish(),
        type: z.string().nullish(),
        function: z.looseObject({ name: z.string(), arguments: z.union([jsonObject, z.string()]) }),
      }),
    )
    .nullish(),
  tool_call_id: z.string().nullish(),
  name: z.string().nullish(),
  reasoning_content: z.string().nullish(),
});
export type RecordMessage = z.infer<typeof recordMessageSchema>;

/** The conversation as chat messages; JSON text of the list in format 1. */
const messagesField = z.preprocess(storedMessages, z.array(recordMessageSchema));

/**
 * The drift check's report (src/chat/drift.ts DriftReport) for a trajectory whose tokens did not match a re-render:
 * where the two first differ, and a few tokens of each side there.
 */
export const driftDetailSchema = z.object({
  status: z.string(),
  mode: z.string(),
  /** First token index (prompt included) where the two differ; -1 when they match. */
  firstDifference: z.number().int(),
  accumulatedLength: z.number().int(),
  renderedLength: z.number().int(),
  accumulatedExcerpt: z.string(),
  renderedExcerpt: z.string(),
});
export type DriftDetail = z.infer<typeof driftDetailSchema>;

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
  /** Its chat messages, as `messages`. */
  messages: messagesField,
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
  /** Arguments as parsed (`{}` when they could not be parsed). */
  arguments: callArguments,
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
  /** The conversation as chat messages, for reading and for the drift check. */
  messages: messagesField,

  reward: z.number(),
  score: z.number(),
  tool_rewards: z.array(z.number()),
  turn_scores: z.array(z.number()),
  /**
   * The tools' calc_reward at the end of the trajectory (`{tool_name: score}`, verl's reward_scores), with
   * tool_lifetime: trajectory; null with per-call tools or none. Added to `reward` only with tool_score_reward: sum.
   */
  tool_scores: z.preprocess(storedToolScores, z.record(z.string(), z.number()).nullish()),
  /**
   * Extra reward parts (verl's reward_extra_info): what a user's reward module returned next to `score`, and `acc`
   * (the answer is correct), which the built-in scorers report and the accuracy metrics read.
   */
  reward_extra: fromText(jsonObject.nullish()),
  advantage: z.number().nullish(),

  num_turns: z.number().int(),
  assistant_turns: z.number().int(),
  user_turns: z.number().int(),
  tool_calls: z.number().int(),
  tool_errors: z.number().int(),
  parse_errors: z.number().int(),
  /** Drift check of the accumulated tokens against a full template render: match, drift, whitespace_only, reasoning_only, skipped. */
  drift: z.string(),
  /** Where the tokens first differ from a re-render, when `drift` is not match. */
  drift_detail: fromText(driftDetailSchema.nullish()),

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
export function trajectoryAcc(t: { score: number; reward_extra?: Record<string, unknown> | null | undefined }): number {
  const acc = t.reward_extra?.["acc"];
  if (typeof acc === "boolean") return acc ? 1 : 0;
  if (typeof acc === "number" && Number.isFinite(acc)) return acc;
  return t.score >= 1 ? 1 : 0;
}

/** A record read from a file (JSON, or a parquet row through trajectoryFromParquetRow), validated. */
export function parseTrajectory(value: unknown, place: string): Trajectory {
  const parsed = trajectorySchema.safeParse(value);
  if (!parsed.success) throw new InputError(`${place}: not a trajectory record: ${formatIssues(parsed.error)}`);
  return parsed.data;
}

export function trajectoryKey(dataIndex: number, sampleIndex: number): string {
  return `${dataIndex}:${sampleIndex}`;
}

/**
 * Sample order: by prompt (data_index; the group, for a prompt drawn twice in one step), then sample_index. What
 * output.order=sample writes, what a step trains in, and what the validation table shows, whatever the finish order.
 */
export function sampleOrder(a: Trajectory, b: Trajectory): number {
  if (a.data_index !== b.data_index) return a.data_index - b.data_index;
  if (a.group_id !== b.group_id) return a.group_id < b.group_id ? -1 : 1;
  return a.sample_index - b.sample_index;
}

const f = (name: string, type: ConstructorParameters<typeof Field>[1], nullable = false) => new Field(name, type, nullable);
const str = (name: string, nullable = false) => f(name, new Utf8(), nullable);
const i32 = (name: string, nullable = false) => f(name, new Int32(), nullable);
const f64 = (name: string, nullable = false) => f(name, new Float64(), nullable);
const list = (name: string, element: ConstructorParameters<typeof Field>[1], nullable = false) =>
  f(name, new List(new Field("element", element, false)), nullable);

/**
 * How trajectory parquet is written (parts, the finished file, rewrites): zstd, no dictionaries and no page
 * statistics (parquet.ts's `dictionary` and `chunkStatisticsOnly` say why), row groups of `rowGroupSize` trajectories.
 */
export const TRAJECTORY_PARQUET = (rowGroupSize: number): WriteOptions => ({
  compression: "zstd",
  rowGroupSize,
  dictionary: false,
  chunkStatisticsOnly: true,
});

/**
 * A chat message in parquet (trajectory-encoding.ts): OpenAI's fields as columns, tool-call arguments as JSON text
 * (their shape is each tool's own), anything else in `extra` (JSON text, null for messages agentrl writes).
 */
const messageStruct = new Struct([
  str("role"),
  str("content", true),
  str("reasoning_content", true),
  list(
    "tool_calls",
    new Struct([str("id", true), str("type", true), f("function", new Struct([str("name"), str("arguments")]))]),
    true,
  ),
  str("tool_call_id", true),
  str("name", true),
  str("extra", true),
]);

/** An earlier sequence of the episode in parquet; `messages` is the one field whose type format 2 changed. */
const contextSegmentStruct = (messages: ConstructorParameters<typeof Field>[1]) =>
  new Struct([
    list("prompt_ids", new Int32()),
    list("response_ids", new Int32()),
    list("response_mask", new Int8()),
    list("response_logprobs", new Float32()),
    f("messages", messages),
    str("reason"),
    str("drift"),
  ]);

/**
 * The parquet layout of a trajectory: token arrays as list<int32>/list<int8>/list<float32>, segments, calls and
 * messages as lists of structs, tool_scores as a list of {name, score}, drift_detail as a struct; reward_extra and
 * tool-call arguments as JSON text, their shape being open (docs/trajectory-format.md).
 */
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
  list("messages", messageStruct),
  f64("reward"),
  f64("score"),
  list("tool_rewards", new Float64()),
  list("turn_scores", new Float64()),
  list("tool_scores", new Struct([str("name"), f64("score")]), true),
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
  f(
    "drift_detail",
    new Struct([
      str("status"),
      str("mode"),
      i32("firstDifference"),
      i32("accumulatedLength"),
      i32("renderedLength"),
      str("accumulatedExcerpt"),
      str("renderedExcerpt"),
    ]),
    true,
  ),
  str("server", true),
  str("weight_version", true),
  list("version_spans", new Struct([i32("start"), i32("end"), str("weight_version", true)]), true),
  list("context_segments", contextSegmentStruct(new List(new Field("element", messageStruct, false))), true),
  i32("step", true),
  f64("started_at"),
  f64("gen_ms"),
  f64("tool_ms"),
  f64("total_ms"),
  i32("retries"),
]);

/**
 * The columns format 2 gave another type, with the type format 1 files have (JSON text): readers that check a
 * file's column types (inspect's column reads) take either.
 */
export const FORMAT_1_COLUMN_TYPES: ReadonlyMap<string, DataType> = new Map<string, DataType>([
  ["messages", new Utf8()],
  ["tool_scores", new Utf8()],
  ["drift_detail", new Utf8()],
  ["context_segments", new List(new Field("element", contextSegmentStruct(new Utf8()), false))],
]);
