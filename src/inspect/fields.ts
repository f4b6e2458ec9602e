/**
 * The fields of a trajectory that `--where` filters on and `--sort` orders by, under the short names people type
 * (`turns`, `finish`, `length`). One table, so filter, sort and list columns always agree.
 */
import { trajectoryAcc } from "../data/trajectory.js";
import { sampledTokens, type TrajectoryRecord } from "./record.js";

export type FieldValue = number | string | null;

export interface FieldSpec {
  type: "number" | "string";
  description: string;
  /** The trajectory columns `get` reads: what a column-projected parquet read must load. */
  columns: string[];
  get(t: TrajectoryRecord): FieldValue;
  /** Multi-valued fields (every tool name called): a condition holds when it holds for any value. */
  all?(t: TrajectoryRecord): string[];
}

const num = (description: string, columns: string[], get: (t: TrajectoryRecord) => number | null | undefined): FieldSpec => ({
  type: "number",
  description,
  columns,
  get: (t) => get(t) ?? null,
});
const str = (description: string, columns: string[], get: (t: TrajectoryRecord) => string | null | undefined): FieldSpec => ({
  type: "string",
  description,
  columns,
  get: (t) => get(t) ?? null,
});

export const FIELDS: Record<string, FieldSpec> = {
  id: str("trajectory id, <data_index>:<sample_index>", ["id"], (t) => t.id),
  group: str("group id shared by the n samples of one prompt", ["group_id"], (t) => t.group_id),
  data_source: str("dataset name, e.g. openai/gsm8k", ["data_source"], (t) => t.data_source),
  agent_loop: str("the agent loop that ran it: tool_agent, single_turn_agent or a registered name", ["agent_loop"], (t) => t.agent_loop),
  status: str("completed | truncated | aborted | failed", ["status"], (t) => t.status),
  finish: str("finish reason: stop, length, interaction_done, max_assistant_turns, ...", ["finish_reason"], (t) => t.finish_reason),
  drift: str("drift check: match | drift | whitespace_only | reasoning_only | skipped", ["drift"], (t) => t.drift),
  error: str("the trajectory's error text", ["error"], (t) => t.error),
  ground_truth: str("the reference answer", ["ground_truth"], (t) => t.ground_truth),
  weight_version: str("engine weight version", ["weight_version"], (t) => t.weight_version),
  server: str("engine URL", ["server"], (t) => t.server),
  tool: {
    type: "string",
    description: "name of any tool called (tool=calc matches a trajectory that called calc at least once)",
    columns: ["calls"],
    get: (t) => t.calls[0]?.name ?? null,
    all: (t) => t.calls.map((c) => c.name),
  },
  reward: num("training reward", ["reward"], (t) => t.reward),
  score: num("outcome score", ["score"], (t) => t.score),
  acc: num("accuracy: the scorer's reported acc (1/0), else score >= 1", ["score", "reward_extra"], trajectoryAcc),
  advantage: num("GRPO advantage (run folders)", ["advantage"], (t) => t.advantage),
  turns: num("assistant turns", ["assistant_turns"], (t) => t.assistant_turns),
  num_turns: num("all turns: prompt + assistant + tool/user", ["num_turns"], (t) => t.num_turns),
  user_turns: num("tool and interaction turns", ["user_turns"], (t) => t.user_turns),
  tool_calls: num("executed tool calls", ["tool_calls"], (t) => t.tool_calls),
  tool_errors: num("executed calls that failed", ["tool_errors"], (t) => t.tool_errors),
  parse_errors: num("tool calls that could not be parsed", ["parse_errors"], (t) => t.parse_errors),
  length: num("response tokens", ["response_ids"], (t) => t.response_ids.length),
  sampled: num("response tokens with loss mask 1", ["response_mask"], sampledTokens),
  prompt_length: num("prompt tokens", ["prompt_ids"], (t) => t.prompt_ids.length),
  step: num("training step", ["step"], (t) => t.step),
  data_index: num("row of the dataset", ["data_index"], (t) => t.data_index),
  sample_index: num("sample number within the group", ["sample_index"], (t) => t.sample_index),
  retries: num("request retries", ["retries"], (t) => t.retries),
  gen_ms: num("time in generation (ms)", ["gen_ms"], (t) => t.gen_ms),
  tool_ms: num("time in tools (ms)", ["tool_ms"], (t) => t.tool_ms),
  total_ms: num("wall time (ms)", ["total_ms"], (t) => t.total_ms),
};

/** Other spellings people reach for. */
export const FIELD_ALIASES: Record<string, string> = {
  finish_reason: "finish",
  source: "data_source",
  group_id: "group",
  assistant_turns: "turns",
  response_length: "length",
  sampled_tokens: "sampled",
  len: "length",
};

export function fieldNamed(name: string): { name: string; spec: FieldSpec } | undefined {
  const canonical = FIELD_ALIASES[name] ?? name;
  const spec = FIELDS[canonical];
  return spec ? { name: canonical, spec } : undefined;
}

