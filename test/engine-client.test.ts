/**
 * Pins the SGLang client's contracts against real HTTP fake servers (test/fake-sglang):
 * - the /generate body it sends (logprobs on, special tokens kept, explicit budget) and the result it maps;
 * - which failures are retried (connection errors, 5xx, 429, timeouts, cut bodies, malformed JSON) with a fresh
 *   rid each time and jittered backoff, and which never are (4xx, a 200 of the wrong shape, the caller's abort),
 *   with the count bounded;
 * - least-outstanding balancing and trajectory stickiness across servers;
 * - caller aborts cancel the request and POST /abort_request; the api key is sent and never shown.
 * Retries that would double-sample a trajectory, or a lost abort, would silently corrupt RL data.
 */
import { inspect } from "node:util";
import { UsageError } from "../src/errors.js";
import { afterEach, describe, expect, it } from "vitest";
import {
  backoffDelayMs,
  EngineConnectionError,
  EngineServerError,
  retryAfterMs,
  SglangClient,
  type SglangClientOptions,
} from "../src/engine/index.js";
import { generateResponseSchema, toGenerateResult } from "../src/engine/wire.js";
import { fakeLogprob, startFakeSglang, type FakeSglang, type FakeSglangOptions } from "./fake-sglang/index.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function fake(options: FakeSglangOptions = {}): Promise<FakeSglang> {
  const server = await startFakeSglang(options);
  cleanups.push(() => server.close());
  return server;
}

function client(options: SglangClientOptions): SglangClient {
  // Tiny, deterministic backoff: the tests count attempts, not time.
  const c = new SglangClient({ retryBaseDelayMs: 1, retryMaxDelayMs: 5, random: () => 0.5, ...options });
  cleanups.push(() => c.close());
  return c;
}

const turn = (inputIds: number[] = [1, 2, 3], maxNewTokens = 8) => ({ inputIds, samplingParams: { maxNewTokens } });

function generateBodies(server: FakeSglang): Array<Record<string, any>> {
  return server.stats.log.filter((e) => e.path === "/generate").map((e) => e.body as Record<string, any>);
}

/** A gate the fake's respond() waits on, so tests control how many requests stay in flight. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

describe("SglangClient.generate: request and result", () => {
  it("sends input_ids with return_logprob, skip_special_tokens false and an explicit max_new_tokens, and maps the answer", async () => {
    const server = await fake({ script: [{ suffix: [3], output: [40, 41, 151645] }] });
    const c = client({ servers: [server.url] });
    const result = await c.generate({
      inputIds: [1, 2, 3],
      samplingParams: { maxNewTokens: 16, temperature: 0.7, topP: 0.9, topK: 20, stopTokenIds: [151643] },
      rid: "traj-1-turn-0",
    });
    expect(generateBodies(server)[0]).toEqual({
      input_ids: [1, 2, 3],
      sampling_params: { max_new_tokens: 16, temperature: 0.7, top_p: 0.9, top_k: 20, stop_token_ids: [151643], skip_special_tokens: false },
      rid: "traj-1-turn-0",
      return_logprob: true,
    });
    expect(result).toMatchObject({
      outputIds: [40, 41, 151645],
      logprobs: [fakeLogprob(40, 0), fakeLogprob(41, 1), fakeLogprob(151645, 2)],
      finishReason: { type: "stop", matched: 151645 },
      abortedByCaller: false,
      promptTokens: 3,
      completionTokens: 3,
      weightVersion: "default",
      rid: "traj-1-turn-0",
      server: server.url,
      attempts: 1,
    });
    expect(result.e2eLatency).toEqual(expect.any(Number));
  });

  it("asks for top_logprobs_num only when the request has topLogprobs, and maps the alternatives per output token", async () => {
    const server = await fake({ script: [{ suffix: [3], output: [40, 41, 151645] }] });
    const c = client({ servers: [server.url] });
    const result = await c.generate({ ...turn([1, 2, 3], 16), topLogprobs: 2 });
    expect(generateBodies(server)[0]!.top_logprobs_num).toBe(2);
    // The fake's alternatives: the sampled token, then the id 7 past it, half a nat less likely.
    expect(result.topLogprobs).toEqual(
      [40, 41, 151645].map((id, i) => [
        { id, logprob: fakeLogprob(id, i) },
        { id: (id + 7) % 151936, logprob: fakeLogprob(id, i) - 0.5 },
      ]),
    );
    const plain = await c.generate(turn([1, 2, 3], 16));
    expect(generateBodies(server)[1]).not.toHaveProperty("top_logprobs_num");
    expect(plain).not.toHaveProperty("topLogprobs");
  });

  it("reports length and SGLang's own abort as finish reasons, not errors", async () => {
    const server = await fake({ script: [{ callIndex: 0, output: [5, 6, 7, 8] }], faults: { queue: [null, { type: "abort" }] } });
    const c = client({ servers: [server.url] });
    expect((await c.generate(turn([1], 2))).finishReason).toEqual({ type: "length", length: 2 });
    const aborted = await c.generate(turn([1], 8));
    expect(aborted.finishReason).toMatchObject({ type: "abort", message: expect.any(String) });
    expect(aborted.abortedByCaller).toBe(false);
  });
});

describe("SglangClient.generate: retries", () => {
  it("retries 5xx until success, each attempt with a fresh rid", async () => {
    const server = await fake({ faults: { queue: [{ type: "status", status: 503 }, { type: "status", status: 500 }] } });
    const c = client({ servers: [server.url], maxRetries: 3 });
    const result = await c.generate({ ...turn(), rid: "mine" });
    expect(result.attempts).toBe(3);
    const rids = generateBodies(server).map((b) => b.rid);
    expect(rids).toHaveLength(3);
    expect(rids[0]).toBe("mine");
    expect(new Set(rids).size).toBe(3);
    expect(result.rid).toBe(rids[2]);
    expect(c.stats()).toMatchObject({ requests: 3, retries: 2, successes: 1, attemptErrors: { http_5xx: 2 } });
  });

  it("gives up after maxRetries with an EngineServerError carrying the status", async () => {
    const server = await fake({ faults: { queue: Array(10).fill({ type: "status", status: 502 }) } });
    const c = client({ servers: [server.url], maxRetries: 2 });
    const error = await c.generate(turn()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineServerError);
    expect(error).toMatchObject({ status: 502, kind: "http_5xx", attempts: 3 });
    expect(server.stats.byPath["/generate"]).toBe(3);
    expect(c.stats().failures.http_5xx).toBe(1);
  });

  it("retries a 429", async () => {
    const server = await fake({ faults: { queue: [{ type: "status", status: 429, retryAfter: 0 }] } });
    const c = client({ servers: [server.url] });
    expect((await c.generate(turn())).attempts).toBe(2);
  });

  it("retries a connection reset", async () => {
    const server = await fake({ faults: { queue: [{ type: "reset" }] } });
    const c = client({ servers: [server.url], unhealthyCooldownMs: 0 });
    const result = await c.generate(turn());
    expect(result.attempts).toBe(2);
    expect(c.stats().attemptErrors.reset).toBe(1);
  });

  it("times out a hung request, aborts its rid on the server, and retries", async () => {
    const server = await fake({ faults: { queue: [{ type: "hang" }] } });
    // Generous next to the fake's millisecond answers, so a loaded machine does not time out the retry too.
    const c = client({ servers: [server.url], requestTimeoutMs: 1000 });
    const result = await c.generate({ ...turn(), rid: "hung" });
    expect(result.attempts).toBe(2);
    expect(result.rid).not.toBe("hung");
    await expect.poll(() => server.stats.log.some((e) => e.path === "/abort_request" && (e.body as any)?.rid === "hung")).toBe(true);
  });

  it("fails with kind timeout when retries are used up on hangs", async () => {
    const server = await fake({ faults: { queue: [{ type: "hang" }, { type: "hang" }] } });
    const c = client({ servers: [server.url], requestTimeoutMs: 500, maxRetries: 1 });
    const error = await c.generate(turn()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineConnectionError);
    expect(error).toMatchObject({ kind: "timeout", attempts: 2 });
  });

  it("does not retry a 400, and surfaces the server's message", async () => {
    const server = await fake({ contextLength: 10 });
    const c = client({ servers: [server.url] });
    const error = await c.generate(turn([1, 2, 3], 20)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineServerError);
    expect(error).toMatchObject({ status: 400, kind: "http_4xx", attempts: 1 });
    expect((error as Error).message).toContain("Requested token count exceeds the model's maximum context length");
    expect(server.stats.byPath["/generate"]).toBe(1);
  });

  it("retries a cut body (partial body) with a fresh rid and a jittered backoff delay", async () => {
    const cut = { type: "drip", intervalMs: 5, chunkBytes: 8, cutAfterBytes: 24 } as const;
    const server = await fake({ faults: { queue: [cut, cut] } });
    const draws: number[] = [];
    const c = client({
      servers: [server.url],
      retryBaseDelayMs: 40,
      retryMaxDelayMs: 60,
      random: () => {
        draws.push(0);
        return 0;
      },
    });
    const started = performance.now();
    const result = await c.generate({ ...turn(), rid: "cut" });
    const elapsed = performance.now() - started;
    expect(result.attempts).toBe(3);
    expect(result.outputIds.length).toBeGreaterThan(0);
    const rids = generateBodies(server).map((b) => b.rid);
    expect(rids).toHaveLength(3);
    expect(new Set(rids).size).toBe(3);
    expect(result.rid).not.toBe("cut");
    // One jitter draw per retry, and at least the un-jittered backoff (40 ms, then 60 ms capped) was waited.
    expect(draws).toHaveLength(2);
    expect(elapsed).toBeGreaterThanOrEqual(95);
    expect(c.stats()).toMatchObject({ retries: 2, successes: 1, attemptErrors: { partial_body: 2 } });
  });

  it("gives up on cut bodies after maxRetries with kind partial_body and the attempts counted", async () => {
    const cut = { type: "drip", intervalMs: 5, chunkBytes: 8, cutAfterBytes: 24 } as const;
    const server = await fake({ faults: { queue: Array(10).fill(cut) } });
    const c = client({ servers: [server.url], maxRetries: 2 });
    const error = await c.generate(turn()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineConnectionError);
    expect(error).toMatchObject({ kind: "partial_body", attempts: 3 });
    expect(server.stats.byPath["/generate"]).toBe(3);
    expect(c.stats().failures.partial_body).toBe(1);
  });

  it("retries a 200 whose body is malformed JSON, with a fresh rid", async () => {
    const server = await fake({ faults: { queue: [{ type: "malformed-json" }] } });
    const c = client({ servers: [server.url] });
    const result = await c.generate({ ...turn(), rid: "garbled" });
    expect(result.attempts).toBe(2);
    expect(result.outputIds.length).toBeGreaterThan(0);
    expect(result.rid).not.toBe("garbled");
    expect(server.stats.faults).toEqual({ "malformed-json": 1 });
    expect(c.stats()).toMatchObject({ retries: 1, successes: 1, attemptErrors: { bad_response: 1 } });
  });

  it("gives up on malformed JSON after maxRetries with kind bad_response and status 200", async () => {
    const server = await fake({ faults: { queue: Array(10).fill({ type: "malformed-json" }) } });
    const c = client({ servers: [server.url], maxRetries: 1 });
    const error = await c.generate(turn()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineServerError);
    expect(error).toMatchObject({ kind: "bad_response", status: 200, attempts: 2 });
    expect((error as Error).message).toContain("body is not JSON");
    expect(server.stats.byPath["/generate"]).toBe(2);
  });

  it("reads a slowly dripped body to the end", async () => {
    const server = await fake({ faults: { queue: [{ type: "drip", intervalMs: 2, chunkBytes: 64 }] } });
    const c = client({ servers: [server.url] });
    expect((await c.generate(turn())).outputIds.length).toBeGreaterThan(0);
  });

  it("does not retry a 200 whose body breaks the protocol", async () => {
    const server = await fake({ faults: { queue: [{ type: "wrong-shape" }] } });
    const c = client({ servers: [server.url] });
    const error = await c.generate(turn()).catch((e: unknown) => e);
    expect(error).toMatchObject({ kind: "bad_response", status: 200 });
    expect(server.stats.byPath["/generate"]).toBe(1);
  });

  it("fails with kind connect when nothing listens, after bounded retries", async () => {
    const server = await fake();
    await server.stop();
    const c = client({ servers: [server.url], maxRetries: 2 });
    const error = await c.generate(turn()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineConnectionError);
    expect(error).toMatchObject({ kind: "connect", attempts: 3 });
  });

  it("rides out a server restart on the same port", async () => {
    const server = await fake();
    const c = client({ servers: [server.url], maxRetries: 5, retryBaseDelayMs: 50, retryMaxDelayMs: 100 });
    await server.stop();
    const pending = c.generate(turn());
    await expect.poll(() => c.stats().attemptErrors.connect).toBeGreaterThan(0);
    await server.restart();
    expect((await pending).outputIds.length).toBeGreaterThan(0);
  });
});

describe("response validation", () => {
  const wire = (over: Record<string, unknown> = {}) => ({
    output_ids: [5, 6],
    meta_info: {
      id: "r",
      finish_reason: { type: "length", length: 2 },
      prompt_tokens: 1,
      completion_tokens: 2,
      output_token_logprobs: [[-0.1, 5, null], [-0.2, 6, null]],
      spec_verify_ct: 3, // unknown keys are tolerated
      ...over,
    },
  });

  it("accepts a well-formed response with unknown keys", () => {
    const parsed = generateResponseSchema.parse(wire());
    expect(toGenerateResult(parsed, { server: "s", attempts: 1 }).logprobs).toEqual([-0.1, -0.2]);
  });

  it("rejects logprob entries that are not [number, int, text|null]", () => {
    expect(generateResponseSchema.safeParse(wire({ output_token_logprobs: [[-0.1, 5, null], [null, 6, null]] })).success).toBe(false);
    expect(generateResponseSchema.safeParse(wire({ output_token_logprobs: [[-0.1, 5.5, null], [-0.2, 6, null]] })).success).toBe(false);
    expect(generateResponseSchema.safeParse({ ...wire(), output_ids: [5, "6"] }).success).toBe(false);
    expect(generateResponseSchema.safeParse(wire({ finish_reason: { type: "tool_calls" } })).success).toBe(false);
  });

  it("refuses top log-probs that do not line up with output_ids, when they were asked for", () => {
    const top = (entries: unknown) => generateResponseSchema.parse(wire({ output_top_logprobs: entries }));
    const asked = { server: "s", attempts: 1, topLogprobs: true };
    expect(toGenerateResult(top([[[-0.1, 5, null]], null]), asked).topLogprobs).toEqual([[{ logprob: -0.1, id: 5 }], []]);
    expect(() => toGenerateResult(top([[[-0.1, 5, null]]]), asked)).toThrow(/1 entries for 2 output tokens/);
    expect(() => toGenerateResult(top([[[-0.1, 5.5, null]], []]), asked)).toThrow(/output_top_logprobs\[0\]\[0\]/);
    expect(() => toGenerateResult(generateResponseSchema.parse(wire()), asked)).toThrow(/no entries/);
    // Not asked for: whatever the server sent is not read.
    expect(toGenerateResult(top("garbage"), { server: "s", attempts: 1 })).not.toHaveProperty("topLogprobs");
  });

  it("refuses logprobs that do not line up with output_ids", () => {
    const short = generateResponseSchema.parse(wire({ output_token_logprobs: [[-0.1, 5, null]] }));
    expect(() => toGenerateResult(short, { server: "s", attempts: 1 })).toThrow(/1 entries but output_ids has 2/);
    const swapped = generateResponseSchema.parse(wire({ output_token_logprobs: [[-0.1, 6, null], [-0.2, 5, null]] }));
    expect(() => toGenerateResult(swapped, { server: "s", attempts: 1 })).toThrow(/is for token 6/);
  });
});

describe("SglangClient: configuration", () => {
  it("rejects a server that is not an http(s) URL as a usage error", () => {
    expect(() => new SglangClient({ servers: ["localhost:30000"] })).toThrow(UsageError);
    expect(() => new SglangClient({ servers: ["not a url"] })).toThrow(/is not a URL/);
    expect(() => new SglangClient({ servers: [] })).toThrow(UsageError);
  });

  it("retries only the request a fault plan targets, by prompt", async () => {
    const server = await fake({
      faults: { decide: (req) => ((req.body as any)?.input_ids?.[0] === 99 && req.index < 2 ? { type: "status", status: 500 } : null) },
    });
    const c = client({ servers: [server.url] });
    const [hit, miss] = await Promise.all([c.generate(turn([99, 1])), c.generate(turn([1, 1]))]);
    expect(hit.attempts).toBe(2);
    expect(miss.attempts).toBe(1);
  });
});

describe("retry timing helpers", () => {
  it("backs off exponentially with at most 25 % jitter, capped", () => {
    const opts = (r: number) => ({ baseDelayMs: 100, maxDelayMs: 1000, random: () => r });
    expect([0, 1, 2, 3, 4].map((n) => backoffDelayMs(n, opts(0)))).toEqual([100, 200, 400, 800, 1000]);
    expect(backoffDelayMs(1, opts(0.999))).toBeCloseTo(150, 0);
  });

  it("reads Retry-After as seconds or HTTP date and ignores unusable values", () => {
    expect(retryAfterMs({ "retry-after": "2" })).toBe(2000);
    expect(retryAfterMs({ "retry-after-ms": "150" })).toBe(150);
    expect(retryAfterMs({ "retry-after": new Date(10_000).toUTCString() }, 7_000)).toBe(3000);
    expect(retryAfterMs({ "retry-after": "-1" })).toBeUndefined();
    expect(retryAfterMs({ "retry-after": "3600" })).toBeUndefined();
    expect(retryAfterMs({})).toBeUndefined();
  });
});

describe("SglangClient: several servers", () => {
  it("sends each request to the server with the fewest outstanding requests", async () => {
    const hold = gate();
    const servers = await Promise.all([0, 1, 2].map(() => fake({ respond: async () => (await hold.opened, [7, 151645]) })));
    const c = client({ servers: servers.map((s) => s.url) });
    const pending = Array.from({ length: 6 }, () => c.generate(turn()));
    try {
      await expect.poll(() => servers.map((s) => s.inFlight())).toEqual([2, 2, 2]);
      expect(Object.values(c.stats().inFlight)).toEqual([2, 2, 2]);
    } finally {
      hold.open(); // a failed assertion must not leave requests hanging
    }
    await Promise.all(pending);
    expect(Object.values(c.stats().inFlight)).toEqual([0, 0, 0]);
  });

  it("avoids a server loaded with slow requests", async () => {
    const slow = gate();
    const busy = await fake({ respond: async () => (await slow.opened, [7, 151645]) });
    const idle = await fake();
    const c = client({ servers: [busy.url, idle.url] });
    const stuck = [c.generate(turn()), c.generate(turn())];
    try {
      await expect.poll(() => busy.inFlight() + idle.inFlight()).toBe(1); // the second went to idle and finished
      // One at a time, so idle always has 0 outstanding against busy's 1.
      for (let i = 0; i < 3; i++) expect((await c.generate(turn())).server).toBe(idle.url);
      expect(busy.inFlight()).toBe(1);
    } finally {
      slow.open();
    }
    await Promise.all(stuck);
  });

  it("keeps a trajectory on one server across turns, and moves it when that server goes down", async () => {
    const servers = await Promise.all([0, 1, 2].map(() => fake()));
    const c = client({ servers: servers.map((s) => s.url), unhealthyCooldownMs: 60_000 });
    const where: Record<string, string[]> = {};
    for (let t = 0; t < 3; t++) {
      await Promise.all(
        ["a", "b", "c", "d", "e", "f"].map(async (traj) => {
          const r = await c.generate({ ...turn([t + 1, 2]), stickyKey: traj });
          (where[traj] ??= []).push(r.server);
        }),
      );
    }
    for (const list of Object.values(where)) expect(new Set(list).size).toBe(1);
    expect(new Set(Object.values(where).map((l) => l[0])).size).toBe(3); // spread over all servers
    const victim = where.a![0]!;
    await servers.find((s) => s.url === victim)!.stop();
    const moved = await c.generate({ ...turn(), stickyKey: "a" });
    expect(moved.server).not.toBe(victim);
    const again = await c.generate({ ...turn(), stickyKey: "a" });
    expect(again.server).toBe(moved.server);
  });

  it("fans admin calls out to every worker, and reads /get_model_info when /model_info is missing", async () => {
    const workers = await Promise.all([0, 1, 2].map(() => fake()));
    const c = client({ servers: [workers[0]!.url], workers: workers.map((w) => w.url) });
    const results = await c.updateWeightsFromDisk({ modelPath: "/ckpt/step-1", weightVersion: "v1" });
    expect(results.map((r) => r.ok && r.value.success)).toEqual([true, true, true]);
    expect(workers.map((w) => w.weightVersion())).toEqual(["v1", "v1", "v1"]);
    for (const call of [c.flushCache(), c.abortRequest({ abortAll: true }), c.releaseMemoryOccupation(), c.resumeMemoryOccupation({ tags: ["kv_cache"] }), c.pauseGeneration({ mode: "retract" }), c.continueGeneration()]) {
      expect((await call).every((r) => r.ok)).toBe(true);
    }
    for (const w of workers) {
      expect(w.stats.byPath).toMatchObject({ "/flush_cache": 1, "/abort_request": 1, "/pause_generation": 1, "/continue_generation": 1 });
    }
    workers[0]!.setFaults({ paths: ["/model_info"], queue: [{ type: "status", status: 404, body: { detail: "Not Found" } }] });
    const info = await c.modelInfo();
    expect(info).toMatchObject({ modelPath: "/ckpt/step-1", weightVersion: "v1", isGeneration: true });
    expect(workers[0]!.stats.byPath["/get_model_info"]).toBe(1);
  });

  it("reports a failed weight update as success false, and an unreachable worker as not ok", async () => {
    const good = await fake({ onUpdateWeights: () => ({ success: false, message: "no such checkpoint" }) });
    const gone = await fake();
    await gone.stop();
    const c = client({ servers: [good.url, gone.url] });
    const [a, b] = await c.updateWeightsFromDisk({ modelPath: "/nope" });
    expect(a).toMatchObject({ ok: true, value: { success: false, message: "no such checkpoint" } });
    expect(b).toMatchObject({ ok: false, error: expect.any(EngineConnectionError) });
    const health = await c.health();
    expect(health.map((h) => h.healthy)).toEqual([true, false]);
  });
});

describe("SglangClient: abort and auth", () => {
  it("cancels on the caller's signal, returns an aborted result, and POSTs /abort_request for the rid", async () => {
    const server = await fake({ latencyMs: 60_000 });
    const c = client({ servers: [server.url] });
    const controller = new AbortController();
    const pending = c.generate({ ...turn(), rid: "deadline", signal: controller.signal });
    await expect.poll(() => server.inFlight()).toBe(1);
    controller.abort();
    const result = await pending;
    expect(result).toMatchObject({ abortedByCaller: true, finishReason: { type: "abort" }, outputIds: [], rid: "deadline" });
    await expect.poll(() => server.stats.log.some((e) => e.path === "/abort_request" && (e.body as any)?.rid === "deadline")).toBe(true);
    await expect.poll(() => server.inFlight()).toBe(0);
    expect(server.stats.byPath["/generate"]).toBe(1);
    expect(c.stats().abortedByCaller).toBe(1);
  });

  it("behind a router, sends the caller's abort to every worker", async () => {
    const router = await fake({ latencyMs: 60_000 });
    const workers = await Promise.all([0, 1].map(() => fake()));
    const c = client({ servers: [router.url], workers: workers.map((w) => w.url) });
    const controller = new AbortController();
    const pending = c.generate({ ...turn(), rid: "routed", signal: controller.signal });
    await expect.poll(() => router.inFlight()).toBe(1);
    controller.abort();
    expect((await pending).abortedByCaller).toBe(true);
    for (const w of workers) {
      await expect.poll(() => w.stats.log.some((e) => e.path === "/abort_request" && (e.body as any)?.rid === "routed")).toBe(true);
    }
  });

  it("does not start a request whose signal already fired", async () => {
    const server = await fake();
    const c = client({ servers: [server.url] });
    const result = await c.generate({ ...turn(), signal: AbortSignal.abort() });
    expect(result.abortedByCaller).toBe(true);
    expect(server.stats.byPath["/generate"]).toBeUndefined();
  });

  it("stops retrying when the caller aborts during backoff", async () => {
    const server = await fake({ faults: { queue: [{ type: "status", status: 503 }] } });
    const c = new SglangClient({ servers: [server.url], retryBaseDelayMs: 60_000, retryMaxDelayMs: 60_000 });
    cleanups.push(() => c.close());
    const controller = new AbortController();
    const pending = c.generate({ ...turn(), signal: controller.signal });
    await expect.poll(() => c.stats().retries).toBe(1);
    controller.abort();
    expect((await pending).abortedByCaller).toBe(true);
    expect(server.stats.byPath["/generate"]).toBe(1);
  });

  it("sends the api key as a Bearer token and never shows it", async () => {
    const server = await fake({ apiKey: "sk-very-secret" });
    const c = client({ servers: [server.url], apiKey: "sk-very-secret" });
    await c.generate(turn());
    expect(server.stats.log.at(-1)?.authorization).toBe("Bearer sk-very-secret");
    expect(inspect(c, { depth: 5 })).not.toContain("sk-very-secret");
    expect(JSON.stringify(c)).not.toContain("sk-very-secret");
  });

  it("fails a 401 at once with a hint about --api-key", async () => {
    const server = await fake({ apiKey: "right" });
    const c = client({ servers: [server.url], apiKey: "wrong" });
    const error = await c.generate(turn()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngineServerError);
    expect(error).toMatchObject({ status: 401, attempts: 1 });
    expect((error as EngineServerError).hint).toContain("--api-key");
    expect((error as Error).message).not.toContain("wrong");
    expect(server.stats.byPath["/generate"]).toBe(1);
  });
});

describe("SglangClient: control calls beside generations", () => {
  // A one_step_off run of the CPU demo hung for the 600 s request timeout in a weight sync: the pause aborted the
  // batch's 128 generations, their continuations went straight back to the paused engine and held every pooled
  // connection (one per unit of concurrency), and the weight update and the continue queued behind them.
  it("pause, weight update and continue go through while every generation slot waits on a paused engine", async () => {
    const hold = gate();
    const server = await fake({ respond: async () => (await hold.opened, [7, 151645]) });
    const c = client({ servers: [server.url], concurrency: 2, adminTimeoutMs: 3_000 });
    const pending = [c.generate(turn()), c.generate(turn())];
    try {
      await expect.poll(() => server.inFlight()).toBe(2);
      await c.pauseGeneration({ mode: "in_place" });
      const updated = await c.updateWeightsFromDisk({ modelPath: "/weights", weightVersion: "2" });
      expect(updated.map((r) => r.ok)).toEqual([true]);
      expect((await c.continueGeneration()).map((r) => r.ok)).toEqual([true]);
    } finally {
      hold.open(); // a failed assertion must not leave requests hanging
    }
    expect((await Promise.all(pending)).map((r) => r.outputIds)).toEqual([[7, 151645], [7, 151645]]);
  });
});

describe("SglangClient: weight updates without disk (request shapes)", () => {
  const bodyOf = (server: FakeSglang, path: string) => server.stats.log.find((e) => e.path === path)?.body as Record<string, unknown>;

  it("gives each worker its own rank_offset and SGLang's field names; a 404 is that worker's failure", async () => {
    const workers = await Promise.all([0, 1].map(() => fake()));
    const c = client({ servers: workers.map((w) => w.url) });
    const offsets = new Map([[workers[0]!.url, 1], [workers[1]!.url, 3]]);
    const results = await c.initWeightsUpdateGroup({
      masterAddress: "10.0.0.1", masterPort: 29700, worldSize: 5, groupName: "g", backend: "nccl", rankOffset: (s) => offsets.get(s)!,
    });
    expect(results.map((r) => r.ok)).toEqual([false, false]);
    expect(results[0]!.ok ? "" : results[0]!.error.message).toContain("/init_weights_update_group answered HTTP 404");
    expect(workers.map((w) => bodyOf(w, "/init_weights_update_group"))).toEqual([1, 3].map((rank_offset) => ({
      master_address: "10.0.0.1", master_port: 29700, rank_offset, world_size: 5, group_name: "g", backend: "nccl",
    })));
    expect(await c.hasPostEndpoint("/init_weights_update_group")).toEqual(workers.map((w) => ({ server: w.url, ok: true, value: false })));
  });

  it("announces a bucket with names, dtypes, shapes, group_name, flush_cache and weight_version", async () => {
    const server = await fake();
    const c = client({ servers: [server.url] });
    await c.updateWeightsFromDistributed({ names: ["a", "b"], dtypes: ["bfloat16", "bfloat16"], shapes: [[2, 3], [3]], groupName: "g", flushCache: true, weightVersion: "4" });
    expect(bodyOf(server, "/update_weights_from_distributed")).toEqual({
      names: ["a", "b"], dtypes: ["bfloat16", "bfloat16"], shapes: [[2, 3], [3]], group_name: "g", flush_cache: true, weight_version: "4",
    });
  });

  it("sends serialized_named_tensors (one entry per tensor-parallel rank), flush_cache and load_format", async () => {
    const server = await fake();
    const c = client({ servers: [server.url] });
    await c.updateWeightsFromTensor({ serialized: () => ["gASV", "gASV"], flushCache: false, loadFormat: "direct" });
    expect(bodyOf(server, "/update_weights_from_tensor")).toEqual({ serialized_named_tensors: ["gASV", "gASV"], flush_cache: false, load_format: "direct" });
  });
});

describe("SglangClient: the engine's busy time", () => {
  it("counts the time with at least one request outstanding once, however many overlap, and no idle time (injected clock)", async () => {
    let now = 0;
    const gates = new Map([1, 2, 3].map((id) => [id, gate()]));
    const server = await fake({ respond: async (inputIds) => (await gates.get(inputIds[0]!)!.opened, [7, 151645]) });
    const c = client({ servers: [server.url], clock: () => now });
    const a = c.generate(turn([1]));
    await expect.poll(() => server.inFlight()).toBe(1);
    now = 50;
    const b = c.generate(turn([2]));
    await expect.poll(() => server.inFlight()).toBe(2);
    now = 100;
    gates.get(1)!.open();
    await a;
    now = 120;
    expect(c.busySeconds()).toBeCloseTo(0.12, 9); // the stretch still open counts
    now = 150;
    gates.get(2)!.open();
    await b;
    now = 300;
    expect(c.busySeconds()).toBeCloseTo(0.15, 9); // 0..150 once, not 100 + 100; nothing since
    const d = c.generate(turn([3]));
    await expect.poll(() => server.inFlight()).toBe(1);
    now = 320;
    gates.get(3)!.open();
    await d;
    expect(c.busySeconds()).toBeCloseTo(0.17, 9);
  });

  it("on a real clock, two 100 ms requests sent together are busy about 100 ms, within the wall time, not 200", async () => {
    const server = await fake({ latencyMs: 100 });
    const c = client({ servers: [server.url] });
    const started = performance.now();
    await Promise.all([c.generate(turn()), c.generate(turn())]);
    const wall = (performance.now() - started) / 1000;
    expect(c.busySeconds()).toBeGreaterThanOrEqual(0.09);
    expect(c.busySeconds()).toBeLessThanOrEqual(wall);
  });
});
