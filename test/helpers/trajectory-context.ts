/** One plain GSM8K-like sample and the TrajectoryContext to run it alone (runTrajectory) against a test server. */
import { afterEach, beforeAll } from "vitest";
import { loadChatModel, type ChatModel } from "../../src/chat/index.js";
import { SglangClient, type SglangClientOptions } from "../../src/engine/index.js";
import { startFakeSglang, type FakeSglang, type FakeSglangOptions } from "../fake-sglang/index.js";
import { QWEN3_DIR } from "./qwen3.js";
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

/**
 * Hooks for a file of runTrajectory tests: the Qwen3 model, loaded once, and `cleanups`, what each test started,
 * closed after it (last first). `onFake` starts a fake SGLang server and a client on it, both closed so, and gives
 * the single-turn context to run a sample there.
 */
export function singleTurnFixture() {
  let model: ChatModel | undefined;
  const cleanups: Array<() => Promise<void>> = [];
  beforeAll(async () => {
    model = await loadChatModel(QWEN3_DIR);
  });
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()!();
  });
  return {
    get model(): ChatModel {
      return model!;
    },
    cleanups,
    async onFake(
      serverOptions: FakeSglangOptions,
      clientOptions: Omit<SglangClientOptions, "servers"> = {},
    ): Promise<{ server: FakeSglang; client: SglangClient; ctx: TrajectoryContext }> {
      const server = await startFakeSglang(serverOptions);
      cleanups.push(() => server.close());
      const client = new SglangClient({ servers: [server.url], ...clientOptions });
      cleanups.push(() => client.close());
      return { server, client, ctx: singleTurnContext(model!, client) };
    },
  };
}
