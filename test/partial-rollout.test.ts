/**
 * Partial rollouts: a weight sync pauses generation with `abort`, and each generation it cut goes on from its last
 * token on the new weights. The turn keeps every token sampled before the cut, with its logprob, and each run of tokens
 * records the version that sampled it. An abort that no pause caused still ends the trajectory.
 */
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { loadChatModel, type ChatModel } from "../src/chat/index.js";
import { SglangClient } from "../src/engine/index.js";
import { runTrajectory, type TrajectoryContext } from "../src/rollout/run-trajectory.js";
import { tokenStaleness } from "../src/data/version-spans.js";
import { startFakeSglang, type FakeSglang, type FakeSglangOptions } from "./fake-sglang/index.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { plainSample as sample, singleTurnContext } from "./helpers/trajectory-context.js";

let model: ChatModel;
beforeAll(async () => {
  model = await loadChatModel(QWEN3_DIR);
});

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});


async function setup(options: FakeSglangOptions): Promise<{ server: FakeSglang; client: SglangClient; ctx: TrajectoryContext }> {
  const server = await startFakeSglang({ partialAbort: true, ...options });
  cleanups.push(() => server.close());
  const client = new SglangClient({ servers: [server.url], maxRetries: 0 });
  cleanups.push(() => client.close());
  const ctx = singleTurnContext(model, client);
  return { server, client, ctx };
}

const generateBodies = (server: FakeSglang) =>
  server.stats.log.filter((e) => e.path === "/generate").map((e) => e.body as { input_ids: number[]; sampling_params: { max_new_tokens: number } });

/** What StepSync does around a load: pause (abort), load tagged with the version, continue. */
async function syncTo(client: SglangClient, version: string): Promise<void> {
  await client.pauseGeneration({ mode: "abort" });
  try {
    await client.updateWeightsFromDisk({ modelPath: "/weights", weightVersion: version });
  } finally {
    await client.continueGeneration();
  }
}

const until = async (check: () => boolean) => {
  while (!check()) await new Promise((r) => setTimeout(r, 5));
};

describe("partial rollouts", () => {
  it("continues a generation cut by a weight update on the new weights, keeping its tokens, logprobs and versions", async () => {
    const { server, client, ctx } = await setup({ latencyMs: 600, defaultLength: 40 });
    const running = runTrajectory(sample, ctx);
    await until(() => server.inFlight() === 1);
    await new Promise((r) => setTimeout(r, 250));
    await syncTo(client, "1");
    const t = await running;

    expect(t.status).toBe("completed");
    expect(t.assistant_turns).toBe(1);
    const bodies = generateBodies(server);
    expect(bodies).toHaveLength(2);
    const spans = t.version_spans!;
    expect(spans).toHaveLength(2);
    const cut = spans[0]!.end;
    expect(cut).toBeGreaterThan(0);
    expect(cut).toBeLessThan(40);
    expect(spans).toEqual([
      { start: 0, end: cut, weight_version: "default" },
      { start: cut, end: t.response_ids.length, weight_version: "1" },
    ]);
    // The continuation sends the prompt and the tokens kept, and asks only for what the turn has left.
    expect(bodies[1]!.input_ids).toEqual([...t.prompt_ids, ...t.response_ids.slice(0, cut)]);
    expect(bodies[1]!.sampling_params.max_new_tokens).toBe(64 - cut);
    expect(t.response_mask.every((m) => m === 1)).toBe(true);
    expect(t.response_logprobs).toHaveLength(t.response_ids.length);
    expect(t.response_logprobs.slice(0, cut).every((lp) => lp < 0)).toBe(true);
    // One assistant segment for the whole turn; the second piece ends it with the EOS it sampled.
    expect(t.segments.filter((s) => s.kind === "assistant")).toHaveLength(1);
    expect(t.segments[0]!.finish_reason).toBe("stop");
    expect(t.weight_version).toBe("1");
    expect(tokenStaleness([t], 1)).toEqual({ mean: cut / t.response_ids.length, max: 1, partialFraction: 1 });
  });

  it("ends a trajectory whose generation the server aborted without a pause", async () => {
    const { server, ctx } = await setup({ faults: { queue: [{ type: "abort", message: "Abort in running queue." }] } });
    const t = await runTrajectory(sample, ctx);
    expect(t.status).toBe("aborted");
    expect(t.finish_reason).toBe("abort");
    expect(generateBodies(server)).toHaveLength(1);
  });

  it("records one span when no update happened", async () => {
    const { ctx } = await setup({});
    const t = await runTrajectory(sample, ctx);
    expect(t.status).toBe("completed");
    expect(t.version_spans).toEqual([{ start: 0, end: t.response_ids.length, weight_version: "default" }]);
  });
});
