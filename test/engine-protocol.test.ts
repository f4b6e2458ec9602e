/**
 * Pins the fake SGLang server to the protocol (the shared suite in test/protocol/), plus the fake's own promises
 * that other tests lean on: scripted replies cut like SGLang cuts them, /abort_request, auth, faults, restart.
 */
import { describe, expect, it } from "vitest";
import { request } from "undici";
import { fakeLogprob, startFakeSglang } from "./fake-sglang/index.js";
import { describeSglangProtocol } from "./protocol/sglang-protocol.js";

describeSglangProtocol("fake server", () => startFakeSglang());
describeSglangProtocol("fake server with an api key sent", async () => {
  // The same suite through a key-protected server proves auth does not change any shape.
  const fake = await startFakeSglang({ apiKey: "k" });
  return { url: fake.url, headers: { authorization: "Bearer k" }, close: fake.close };
});

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await request(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  const text = await res.body.text();
  return { status: res.statusCode, text, json: text ? JSON.parse(text) : undefined };
}

describe("fake SGLang: scripted model", () => {
  it("replies with the script entry whose suffix matches, keeping the EOS as the last output id", async () => {
    const fake = await startFakeSglang({ script: [{ suffix: [5, 6], output: [70, 71, 151645, 99] }] });
    try {
      const r = await post(`${fake.url}/generate`, { input_ids: [1, 5, 6], sampling_params: { max_new_tokens: 10 }, return_logprob: true });
      expect(r.json.output_ids).toEqual([70, 71, 151645]);
      expect(r.json.meta_info.finish_reason).toEqual({ type: "stop", matched: 151645 });
      expect(r.json.meta_info.output_token_logprobs).toEqual([
        [fakeLogprob(70, 0), 70, null],
        [fakeLogprob(71, 1), 71, null],
        [fakeLogprob(151645, 2), 151645, null],
      ]);
      expect(r.json.text).toBe("<70><71>"); // the matched stop token is not decoded
    } finally {
      await fake.close();
    }
  });

  it("truncates a longer script to max_new_tokens with finish_reason length", async () => {
    const fake = await startFakeSglang({ script: [{ callIndex: 0, output: [10, 11, 12, 13, 151645] }] });
    try {
      const r = await post(`${fake.url}/generate`, { input_ids: [1], sampling_params: { max_new_tokens: 2 } });
      expect(r.json.output_ids).toEqual([10, 11]);
      expect(r.json.meta_info.finish_reason).toEqual({ type: "length", length: 2 });
    } finally {
      await fake.close();
    }
  });

  it("passes prompt, sampling params and call index to respond()", async () => {
    const seen: unknown[] = [];
    const fake = await startFakeSglang({
      respond: (ids, params, ctx) => {
        seen.push([ids, params.max_new_tokens, ctx.callIndex]);
        return [ids.length + 500, 151643];
      },
    });
    try {
      const r = await post(`${fake.url}/generate`, { input_ids: [[1, 2], [3]], sampling_params: { max_new_tokens: 4 } });
      expect(r.json.map((o: any) => o.output_ids)).toEqual([[502, 151643], [501, 151643]]);
      expect(seen).toEqual([[[1, 2], 4, 0], [[3], 4, 1]]);
    } finally {
      await fake.close();
    }
  });
});

describe("fake SGLang: aborts, auth, faults, restart", () => {
  it("/abort_request ends a running request with HTTP 200 and finish_reason abort", async () => {
    const fake = await startFakeSglang({ latencyMs: 60_000 });
    try {
      const pending = post(`${fake.url}/generate`, { input_ids: [1, 2], sampling_params: { max_new_tokens: 4 }, rid: "slow" });
      await expect.poll(() => fake.inFlight()).toBe(1);
      expect((await post(`${fake.url}/abort_request`, { rid: "slow", abort_all: false })).status).toBe(200);
      const r = await pending;
      expect(r.status).toBe(200);
      expect(r.json.meta_info.finish_reason).toMatchObject({ type: "abort", message: expect.any(String) });
      expect(fake.stats.aborted).toBe(1);
    } finally {
      await fake.close();
    }
  });

  it("lets in-flight generations finish before update_weights_from_disk answers", async () => {
    const fake = await startFakeSglang({ latencyMs: 300 });
    try {
      const order: string[] = [];
      const gen = post(`${fake.url}/generate`, { input_ids: [1], sampling_params: { max_new_tokens: 2 } }).then(() => order.push("generate"));
      await expect.poll(() => fake.inFlight()).toBe(1);
      const update = post(`${fake.url}/update_weights_from_disk`, { model_path: "/ckpt/2", weight_version: "2" }).then((r) => {
        order.push("update");
        return r;
      });
      const [, r] = await Promise.all([gen, update]);
      expect(order).toEqual(["generate", "update"]);
      expect(r.json).toEqual({ success: true, message: "Succeeded to update model weights.", num_paused_requests: 0 });
      expect(fake.weightVersion()).toBe("2");
      const models = await request(`${fake.url}/v1/models`);
      expect(((await models.body.json()) as any).data[0].id).toBe("/ckpt/2"); // served model name follows model_path
    } finally {
      await fake.close();
    }
  });

  it("pause_generation(abort) aborts running requests; in_place holds new ones until continue", async () => {
    const fake = await startFakeSglang({ latencyMs: 60_000 });
    try {
      const running = post(`${fake.url}/generate`, { input_ids: [1], sampling_params: { max_new_tokens: 2 } });
      await expect.poll(() => fake.inFlight()).toBe(1);
      await post(`${fake.url}/pause_generation`, { mode: "abort" });
      expect((await running).json.meta_info.finish_reason.type).toBe("abort");
      await post(`${fake.url}/continue_generation`, {});
    } finally {
      await fake.close();
    }
    const quick = await startFakeSglang();
    try {
      await post(`${quick.url}/pause_generation`, { mode: "in_place" });
      let answered = false;
      const held = post(`${quick.url}/generate`, { input_ids: [1], sampling_params: { max_new_tokens: 2 } }).then((r) => {
        answered = true;
        return r;
      });
      await expect.poll(() => quick.inFlight()).toBe(1);
      expect(answered).toBe(false);
      await post(`${quick.url}/continue_generation`, {});
      expect((await held).status).toBe(200);
    } finally {
      await quick.close();
    }
  });

  it("wants Bearer auth everywhere but /health, answering 401 {error: Unauthorized}", async () => {
    const fake = await startFakeSglang({ apiKey: "secret" });
    try {
      const denied = await post(`${fake.url}/generate`, { input_ids: [1], sampling_params: { max_new_tokens: 1 } });
      expect(denied.status).toBe(401);
      expect(denied.json).toEqual({ error: "Unauthorized" });
      const allowed = await post(`${fake.url}/generate`, { input_ids: [1], sampling_params: { max_new_tokens: 1 } }, { authorization: "Bearer secret" });
      expect(allowed.status).toBe(200);
      const health = await request(`${fake.url}/health`);
      await health.body.text();
      expect(health.statusCode).toBe(200);
    } finally {
      await fake.close();
    }
  });

  it("injects queued faults in order, then answers normally", async () => {
    const fake = await startFakeSglang({
      faults: { queue: [{ type: "status", status: 503 }, { type: "wrong-shape" }, null, { type: "status", status: 429, retryAfter: 2 }] },
    });
    try {
      const body = { input_ids: [1], sampling_params: { max_new_tokens: 1 } };
      expect((await post(`${fake.url}/generate`, body)).status).toBe(503);
      expect((await post(`${fake.url}/generate`, body)).json.output_ids).toBe("not a list");
      expect((await post(`${fake.url}/generate`, body)).status).toBe(200);
      const limited = await request(`${fake.url}/generate`, { method: "POST", body: JSON.stringify(body) });
      await limited.body.text();
      expect(limited.statusCode).toBe(429);
      expect(limited.headers["retry-after"]).toBe("2");
      expect((await post(`${fake.url}/generate`, body)).status).toBe(200);
      expect(fake.stats.faults).toEqual({ status: 2, "wrong-shape": 1 });
    } finally {
      await fake.close();
    }
  });

  it("draws random faults reproducibly from a seed", async () => {
    const outcomes = async () => {
      const fake = await startFakeSglang({ faults: { random: { seed: 7, rate: 0.5, faults: [{ type: "status", status: 500 }, { type: "status", status: 502 }] } } });
      try {
        const codes: number[] = [];
        for (let i = 0; i < 20; i++) codes.push((await post(`${fake.url}/generate`, { input_ids: [1], sampling_params: { max_new_tokens: 1 } })).status);
        return codes;
      } finally {
        await fake.close();
      }
    };
    const first = await outcomes();
    expect(await outcomes()).toEqual(first);
    expect(first.filter((c) => c !== 200).length).toBeGreaterThan(0);
    expect(first.filter((c) => c === 200).length).toBeGreaterThan(0);
  });

  it("resets the connection on a reset fault and serves again after stop/restart on the same port", async () => {
    const fake = await startFakeSglang({ faults: { queue: [{ type: "reset" }] } });
    try {
      const body = { input_ids: [1], sampling_params: { max_new_tokens: 1 } };
      await expect(post(`${fake.url}/generate`, body)).rejects.toThrow();
      await fake.stop();
      await expect(post(`${fake.url}/generate`, body)).rejects.toThrow();
      await fake.restart();
      expect((await post(`${fake.url}/generate`, body)).status).toBe(200);
    } finally {
      await fake.close();
    }
  });
});
