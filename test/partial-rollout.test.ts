/**
 * Partial rollouts: a weight sync pauses generation with `abort`, and each generation it cut goes on from its last
 * token on the new weights. The turn keeps every token sampled before the cut, with its logprob, and each run of tokens
 * records the version that sampled it. An abort that no pause caused still ends the trajectory.
 */
import { describe, expect, it } from "vitest";
import { SglangClient } from "../src/engine/index.js";
import { runTrajectory } from "../src/rollout/run-trajectory.js";
import { tokenStaleness } from "../src/data/version-spans.js";
import type { FakeSglang, FakeSglangOptions } from "./fake-sglang/index.js";
import { plainSample as sample, singleTurnContext, singleTurnFixture } from "./helpers/trajectory-context.js";
import { tinyQwenModel } from "./helpers/tiny-model.js";
import { startInferenceServer } from "../src/serve/index.js";

const fixture = singleTurnFixture();
const { cleanups } = fixture;

/** A fake server that answers an abort with the tokens decoded so far, and a client that does not retry. */
const setup = (options: FakeSglangOptions) => fixture.onFake({ partialAbort: true, ...options }, { maxRetries: 0 });

const generateBodies = (server: FakeSglang) =>
  server.stats.log.filter((e) => e.path === "/generate").map((e) => e.body as { input_ids: number[]; sampling_params: { max_new_tokens: number } });

/** What StepSync does around a load: pause (abort), load tagged with the version, continue. */
async function syncTo(client: SglangClient, version: string, modelPath = "/weights"): Promise<void> {
  await client.pauseGeneration({ mode: "abort" });
  try {
    const [loaded] = await client.updateWeightsFromDisk({ modelPath, weightVersion: version });
    expect(loaded!.ok && loaded!.value.success).toBe(true);
  } finally {
    await client.continueGeneration();
  }
}

const until = async (check: () => boolean | Promise<boolean>) => {
  while (!(await check())) await new Promise((r) => setTimeout(r, 5));
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

  it("sends the rollout's request priority with every piece of a cut generation (async_training.engine_priority)", async () => {
    const { server, client, ctx } = await setup({ latencyMs: 600, defaultLength: 40 });
    const running = runTrajectory(sample, { ...ctx, priority: -3 });
    await until(() => server.inFlight() === 1);
    await new Promise((r) => setTimeout(r, 250));
    await syncTo(client, "1");
    expect((await running).version_spans).toHaveLength(2);
    const bodies = server.stats.log.filter((e) => e.path === "/generate").map((e) => e.body as Record<string, unknown>);
    expect(bodies.map((b) => b.priority)).toEqual([-3, -3]);
    // Without one, the field is not sent at all: an SGLang started with --abort-on-priority-when-disabled refuses it.
    server.resetStats();
    await runTrajectory(sample, ctx);
    const plain = server.stats.log.filter((e) => e.path === "/generate").map((e) => e.body as Record<string, unknown>);
    expect(plain).toHaveLength(1);
    expect(Object.keys(plain[0]!)).not.toContain("priority");
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

describe("partial rollouts on the embedded engine", () => {
  it("a real generation paused mid-way for a weight load is continued on the new version, token for token", async () => {
    const tiny = tinyQwenModel();
    const engine = await startInferenceServer({ engine: "embedded", model: tiny, port: 0 });
    cleanups.push(async () => void (await engine.stop()));
    const client = new SglangClient({ servers: [engine.url], maxRetries: 0 });
    cleanups.push(() => client.close());
    // A random-init model rarely samples its end of turn: the turn runs to its budget, long enough to be cut.
    const ctx = { ...singleTurnContext(fixture.model, client), maxResponseLength: 3000 };
    ctx.rollout = { ...ctx.rollout, seed: 5 };
    const running = runTrajectory(sample, ctx);
    // Cut it once it decodes (a pause before that would abort it with no token sampled on the old weights).
    await until(async () => {
      const [load] = (await (await fetch(`${engine.url}/get_load`)).json()) as Array<{ num_running_reqs: number }>;
      return load!.num_running_reqs === 1;
    });
    await new Promise((r) => setTimeout(r, 200));
    await syncTo(client, "7", tiny);
    const t = await running;
    expect([t.status, t.finish_reason, t.error]).toEqual(["truncated", "length", null]);
    const versions = (t.version_spans ?? []).map((s) => s.weight_version);
    expect(versions).toEqual(["default", "7"]);
    const [first, second] = t.version_spans!;
    expect(first!.start).toBe(0);
    expect(second!.start).toBe(first!.end);
    expect(second!.end).toBe(t.response_ids.length);
    expect(t.response_logprobs.every((lp) => lp <= 0 && Number.isFinite(lp))).toBe(true);
    expect(t.response_mask.every((m) => m === 1)).toBe(true);
    expect(t.assistant_turns).toBe(1);
  }, 120_000);
});
