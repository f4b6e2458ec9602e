/** One plain GSM8K-like sample and the TrajectoryContext to run it alone (runTrajectory) against a test server. */
import type { ChatModel } from "../../src/chat/index.js";
import type { SglangClient } from "../../src/engine/index.js";
import { getParser } from "../../src/parsers/index.js";
import { rolloutSchema } from "../../src/rollout/config.js";
import type { TrajectoryContext } from "../../src/rollout/run-trajectory.js";
import type { Sample } from "../../src/rollout/sample.js";

export const plainSample: Sample = {
  dataIndex: 0,
  sampleIndex: 0,
  groupId: "0",
  dataSource: "openai/gsm8k",
  messages: [{ role: "user", content: "What is 2 + 2?" }],
  groundTruth: "4",
  toolsKwargs: {},
  interactionKwargs: {},
  extraInfo: {},
};

/** No tools, no user, one turn of at most 64 tokens. */
export function singleTurnContext(model: ChatModel, client: SglangClient): TrajectoryContext {
  return {
    model,
    client,
    parser: getParser("hermes"),
    tools: undefined,
    toolSchemas: [],
    interactions: undefined,
    rewardFunction: undefined,
    rollout: rolloutSchema.parse({ multi_turn: { enable: false } }),
    maxPromptLength: 1024,
    maxResponseLength: 64,
    signal: new AbortController().signal,
  };
}
