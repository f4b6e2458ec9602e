/**
 * GSM8K into verl's multi-turn rows. Texts, ground-truth extraction and row layout follow verl's
 * examples/data_preprocess/gsm8k_multiturn_w_tool.py (+ agent_name, as gsm8k_tool_agent_loop.py),
 * gsm8k_multiturn_w_interaction.py and gsm8k.py, so a dataset made by either tool works in the other.
 */
import { Bool, Field, Int64, List, Schema, Struct, Utf8 } from "apache-arrow";

export type Gsm8kVariant = "tool" | "interaction" | "plain";
export const GSM8K_VARIANTS: readonly Gsm8kVariant[] = ["tool", "interaction", "plain"];
export type Split = "train" | "test";

export const GSM8K_DATA_SOURCE = "openai/gsm8k";

/** The multi-turn scripts use backticks; the single-turn gsm8k.py uses double quotes. */
export const INSTRUCTION_MULTI_TURN = "Let's think step by step and output the final answer after `####`.";
export const INSTRUCTION_PLAIN = 'Let\'s think step by step and output the final answer after "####".';

// Verbatim from verl, typos included: models trained on verl's data saw exactly these strings.
export const SYSTEM_PROMPT_TOOL =
  "You are a math expert. You are given a question and you need to solve it step by step. " +
  "Reasoning step by step before any tool call. " +
  "You should use the `calc_gsm8k_reward` tool after step by step solving the question, " +
  "before generate final answer at least once and refine your answer if necessary. " +
  "Put your final answer in the format of `#### <answer>`.";
export const SYSTEM_PROMPT_INTERACTION =
  "You are a math expert. You are given a question and you need to solve it step by step. " +
  "You should rethinking carefully if user point out your answer is wrong. " +
  "Put your final answer in the format of `#### <answer>`.";

const ANSWER_PATTERN = /#### (-?[0-9.,]+)/;

/** verl's extract_solution: the first `#### N` of the answer, commas removed, kept as a string. */
export function extractGroundTruth(answer: string): string | undefined {
  const match = ANSWER_PATTERN.exec(answer);
  return match?.[1]?.replace(/,/g, "");
}

export interface RawGsm8k {
  question: string;
  answer: string;
}

/** One verl row. `index` is the row's position within its split, as `with_indices=True` gives it. */
export function makeGsm8kRow(
  raw: RawGsm8k,
  groundTruth: string,
  split: Split,
  index: number,
  variant: Gsm8kVariant,
): Record<string, unknown> {
  const instruction = variant === "plain" ? INSTRUCTION_PLAIN : INSTRUCTION_MULTI_TURN;
  const question = `${raw.question} ${instruction}`;
  const rewardModel = { style: "rule", ground_truth: groundTruth };
  const baseInfo = { split, index, answer: raw.answer, question: raw.question };
  switch (variant) {
    case "tool":
      return {
        data_source: GSM8K_DATA_SOURCE,
        agent_name: "tool_agent",
        prompt: [
          { role: "system", content: SYSTEM_PROMPT_TOOL },
          { role: "user", content: question },
        ],
        ability: "math",
        reward_model: rewardModel,
        extra_info: {
          ...baseInfo,
          need_tools_kwargs: true,
          tools_kwargs: { calc_gsm8k_reward: { create_kwargs: { ground_truth: groundTruth } } },
          interaction_kwargs: { query: question, ground_truth: groundTruth },
        },
      };
    case "interaction":
      return {
        data_source: GSM8K_DATA_SOURCE,
        prompt: [
          { role: "system", content: SYSTEM_PROMPT_INTERACTION },
          { role: "user", content: question },
        ],
        ability: "math",
        reward_model: rewardModel,
        extra_info: { ...baseInfo, interaction_kwargs: { name: "gsm8k", query: question, ground_truth: groundTruth } },
      };
    case "plain":
      return {
        data_source: GSM8K_DATA_SOURCE,
        prompt: [{ role: "user", content: question }],
        ability: "math",
        reward_model: rewardModel,
        extra_info: baseInfo,
      };
  }
}

// HF `datasets` infers nullable fields in first-seen key order; these schemas reproduce what
// `Dataset.to_parquet` writes for verl's scripts (checked against `datasets` 5.0 with pyarrow in the tests).
const str = (name: string) => new Field(name, new Utf8(), true);
const struct = (name: string, children: Field[]) => new Field(name, new Struct(children), true);

const promptField = new Field(
  "prompt",
  new List(new Field("element", new Struct([str("role"), str("content")]), true)),
  true,
);
const rewardModelField = struct("reward_model", [str("style"), str("ground_truth")]);
const baseInfoFields = () => [
  str("split"),
  new Field("index", new Int64(), true),
  str("answer"),
  str("question"),
];

export function gsm8kArrowSchema(variant: Gsm8kVariant): Schema {
  switch (variant) {
    case "tool":
      return new Schema([
        str("data_source"),
        str("agent_name"),
        promptField,
        str("ability"),
        rewardModelField,
        struct("extra_info", [
          ...baseInfoFields(),
          new Field("need_tools_kwargs", new Bool(), true),
          struct("tools_kwargs", [
            struct("calc_gsm8k_reward", [struct("create_kwargs", [str("ground_truth")])]),
          ]),
          struct("interaction_kwargs", [str("query"), str("ground_truth")]),
        ]),
      ]);
    case "interaction":
      return new Schema([
        str("data_source"),
        promptField,
        str("ability"),
        rewardModelField,
        struct("extra_info", [
          ...baseInfoFields(),
          struct("interaction_kwargs", [str("name"), str("query"), str("ground_truth")]),
        ]),
      ]);
    case "plain":
      return new Schema([
        str("data_source"),
        promptField,
        str("ability"),
        rewardModelField,
        struct("extra_info", baseInfoFields()),
      ]);
  }
}
