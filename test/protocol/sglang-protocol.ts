/**
 * The SGLang native protocol as agentrl relies on it, as a reusable vitest suite. It pins shapes and semantics
 * (sglang.md §1-2), never token values, so it runs unchanged against the fake server now and against a real or
 * embedded engine later. Every request is raw HTTP, so the suite tests the server, not our client.
 *
 * Server requirements: greedy decoding (temperature 0) must be deterministic, and the context length must come
 * from /server_info `context_length`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "undici";

export interface ProtocolServer {
  url: string;
  /** Extra headers on every request, e.g. `authorization` for a server started with --api-key. */
  headers?: Record<string, string>;
  close(): Promise<void>;
}

export interface ProtocolOptions {
  /** A prompt the model accepts. @default a short run of mid-vocabulary ids */
  promptIds?: number[];
  /** Token budget for the requests that must not hit EOS. @default 8 */
  shortBudget?: number;
}

interface Reply {
  status: number;
  json: unknown;
  text: string;
}

async function callWith(
  extraHeaders: Record<string, string>,
  base: string,
  method: "GET" | "POST",
  path: string,
  body?: unknown,
): Promise<Reply> {
  const res = await request(`${base}${path}`, {
    method,
    headers: body === undefined ? { ...extraHeaders } : { "content-type": "application/json", ...extraHeaders },
    body: body === undefined ? null : JSON.stringify(body),
  });
  const text = await res.body.text();
  let json: unknown;
  try {
    json = text === "" ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.statusCode, json, text };
}

type Obj = Record<string, any>;

/** Checks one non-streaming /generate object and returns it typed loosely. */
function expectGenerateObject(value: unknown, promptLength: number): Obj {
  const obj = value as Obj;
  expect(Array.isArray(obj.output_ids)).toBe(true);
  for (const id of obj.output_ids) expect(Number.isInteger(id)).toBe(true);
  const meta = obj.meta_info as Obj;
  expect(typeof meta.id).toBe("string");
  expect(meta.prompt_tokens).toBe(promptLength);
  expect(meta.completion_tokens).toBe(obj.output_ids.length);
  expect(typeof meta.weight_version).toBe("string");
  expect(typeof meta.e2e_latency).toBe("number");
  expect(["stop", "length", "abort"]).toContain(meta.finish_reason?.type);
  return obj;
}

export function describeSglangProtocol(name: string, startServer: () => Promise<ProtocolServer>, options: ProtocolOptions = {}): void {
  const prompt = options.promptIds ?? [9707, 11, 1246, 525, 498, 30, 358, 1079];
  const budget = options.shortBudget ?? 8;

  describe(`SGLang protocol: ${name}`, () => {
    let server: ProtocolServer;
    let base: string;

    beforeAll(async () => {
      server = await startServer();
      base = server.url;
    });
    const call = (b: string, method: "GET" | "POST", path: string, body?: unknown) => callWith(server.headers ?? {}, b, method, path, body);
    afterAll(async () => {
      await server?.close();
    });

    const greedy = (extra: Obj = {}) => ({ max_new_tokens: budget, temperature: 0, ...extra });

    it("answers a single input_ids request with one object: output_ids, meta_info, and the given rid", async () => {
      const reply = await call(base, "POST", "/generate", {
        input_ids: prompt,
        sampling_params: greedy(),
        rid: "proto-single",
        return_logprob: true,
      });
      expect(reply.status).toBe(200);
      expect(Array.isArray(reply.json)).toBe(false);
      const obj = expectGenerateObject(reply.json, prompt.length);
      expect(obj.meta_info.id).toBe("proto-single");
      expect(obj.output_ids.length).toBeGreaterThan(0);
      expect(obj.output_ids.length).toBeLessThanOrEqual(budget);
    });

    it("returns one [logprob, token_id, null] entry per output id, logprob ≤ 0", async () => {
      const reply = await call(base, "POST", "/generate", { input_ids: prompt, sampling_params: greedy(), return_logprob: true });
      const obj = expectGenerateObject(reply.json, prompt.length);
      const entries = obj.meta_info.output_token_logprobs as unknown[][];
      expect(entries).toHaveLength(obj.output_ids.length);
      entries.forEach((entry, i) => {
        expect(entry).toHaveLength(3);
        expect(typeof entry[0]).toBe("number");
        expect(entry[0] as number).toBeLessThanOrEqual(0);
        expect(entry[1]).toBe(obj.output_ids[i]);
        expect(entry[2]).toBeNull();
      });
    });

    it("leaves the logprob fields out unless return_logprob is true", async () => {
      const reply = await call(base, "POST", "/generate", { input_ids: prompt, sampling_params: greedy() });
      const obj = expectGenerateObject(reply.json, prompt.length);
      expect(obj.meta_info.output_token_logprobs).toBeUndefined();
    });

    it("stops at max_new_tokens with finish_reason {type: length, length}", async () => {
      const reply = await call(base, "POST", "/generate", {
        input_ids: prompt,
        sampling_params: greedy({ max_new_tokens: 3, ignore_eos: true }),
      });
      const obj = expectGenerateObject(reply.json, prompt.length);
      expect(obj.output_ids).toHaveLength(3);
      expect(obj.meta_info.finish_reason).toMatchObject({ type: "length", length: 3 });
    });

    it("keeps a matched stop token as the last output id, with finish_reason {type: stop, matched: id}", async () => {
      // Greedy is deterministic: sample once, then ask again with one of the sampled ids as a stop token.
      const first = await call(base, "POST", "/generate", {
        input_ids: prompt,
        sampling_params: greedy({ max_new_tokens: 6, ignore_eos: true }),
      });
      const ids = (first.json as Obj).output_ids as number[];
      expect(ids).toHaveLength(6);
      const stopId = ids[3]!;
      const stopAt = ids.indexOf(stopId);
      const second = await call(base, "POST", "/generate", {
        input_ids: prompt,
        sampling_params: greedy({ max_new_tokens: 6, ignore_eos: true, stop_token_ids: [stopId] }),
        return_logprob: true,
      });
      const obj = expectGenerateObject(second.json, prompt.length);
      expect(obj.output_ids).toEqual(ids.slice(0, stopAt + 1));
      expect(obj.output_ids.at(-1)).toBe(stopId);
      expect(obj.meta_info.finish_reason).toMatchObject({ type: "stop", matched: stopId });
      expect(obj.meta_info.output_token_logprobs).toHaveLength(obj.output_ids.length);
    });

    it("answers a batch of input_ids with an array in input order, rid string expanded to {rid}_{i}", async () => {
      const other = prompt.slice(0, 3);
      const reply = await call(base, "POST", "/generate", {
        input_ids: [prompt, other],
        sampling_params: greedy(),
        rid: "proto-batch",
        return_logprob: true,
      });
      expect(reply.status).toBe(200);
      const arr = reply.json as unknown[];
      expect(Array.isArray(arr)).toBe(true);
      expect(arr).toHaveLength(2);
      const a = expectGenerateObject(arr[0], prompt.length);
      const b = expectGenerateObject(arr[1], other.length);
      expect(a.meta_info.id).toBe("proto-batch_0");
      expect(b.meta_info.id).toBe("proto-batch_1");
    });

    it("turns n>1 into an array of n samples with fresh rids", async () => {
      const reply = await call(base, "POST", "/generate", {
        input_ids: prompt,
        sampling_params: { max_new_tokens: budget, temperature: 1.0, n: 3 },
        rid: "proto-n",
      });
      expect(reply.status).toBe(200);
      const arr = reply.json as unknown[];
      expect(arr).toHaveLength(3);
      const ids = arr.map((item) => expectGenerateObject(item, prompt.length).meta_info.id as string);
      expect(new Set(ids).size).toBe(3);
      expect(ids).not.toContain("proto-n");
    });

    it("orders a batch of B prompts with n samples by prompt: index i*n + j", async () => {
      const other = prompt.slice(0, 2);
      const reply = await call(base, "POST", "/generate", {
        input_ids: [prompt, other],
        sampling_params: { max_new_tokens: budget, temperature: 1.0, n: 2 },
      });
      const arr = reply.json as Obj[];
      expect(arr.map((o) => o.meta_info.prompt_tokens)).toEqual([prompt.length, prompt.length, other.length, other.length]);
    });

    it("rejects an empty input_ids with HTTP 400 {error: {message}}", async () => {
      const reply = await call(base, "POST", "/generate", { input_ids: [], sampling_params: greedy() });
      expect(reply.status).toBe(400);
      expect(typeof (reply.json as Obj).error.message).toBe("string");
    });

    it("rejects prompt + max_new_tokens beyond the context length with HTTP 400", async () => {
      const info = (await call(base, "GET", "/server_info")).json as Obj;
      expect(Number.isInteger(info.context_length)).toBe(true);
      const reply = await call(base, "POST", "/generate", {
        input_ids: prompt,
        sampling_params: { max_new_tokens: info.context_length, temperature: 0 },
      });
      expect(reply.status).toBe(400);
      expect((reply.json as Obj).error.message).toMatch(/^Requested token count exceeds the model's maximum context length/);
    });

    it("serves /model_info and the deprecated /get_model_info with the same shape", async () => {
      for (const path of ["/model_info", "/get_model_info"]) {
        const reply = await call(base, "GET", path);
        expect(reply.status).toBe(200);
        const info = reply.json as Obj;
        expect(typeof info.model_path).toBe("string");
        expect(info.is_generation).toBe(true);
        expect(typeof info.weight_version).toBe("string");
      }
    });

    it("answers /health with 200 and /v1/models with the served model", async () => {
      expect((await call(base, "GET", "/health")).status).toBe(200);
      const models = (await call(base, "GET", "/v1/models")).json as Obj;
      expect(models.object).toBe("list");
      expect(models.data[0]).toMatchObject({ object: "model", owned_by: "sglang" });
    });

    it("update_weights_from_disk sets weight_version in /model_info and in later generations", async () => {
      const before = (await call(base, "GET", "/model_info")).json as Obj;
      const version = `proto-${Date.now()}`;
      const reply = await call(base, "POST", "/update_weights_from_disk", { model_path: before.model_path, weight_version: version });
      expect(reply.status).toBe(200);
      expect(reply.json).toMatchObject({ success: true, message: expect.any(String) });
      expect(Number.isInteger((reply.json as Obj).num_paused_requests)).toBe(true);
      const after = (await call(base, "GET", "/model_info")).json as Obj;
      expect(after.weight_version).toBe(version);
      const gen = await call(base, "POST", "/generate", { input_ids: prompt, sampling_params: greedy() });
      expect((gen.json as Obj).meta_info.weight_version).toBe(version);
    });

    it("update_weights_from_disk without model_path is a 400", async () => {
      const reply = await call(base, "POST", "/update_weights_from_disk", {});
      expect(reply.status).toBe(400);
    });

    it("/abort_request answers 200 even when no request matches", async () => {
      const reply = await call(base, "POST", "/abort_request", { rid: "no-such-rid", abort_all: false });
      expect(reply.status).toBe(200);
    });

    it("pause_generation and continue_generation answer with status ok", async () => {
      const pause = await call(base, "POST", "/pause_generation", { mode: "in_place" });
      expect(pause.json).toMatchObject({ status: "ok" });
      const resume = await call(base, "POST", "/continue_generation", {});
      expect(resume.json).toMatchObject({ status: "ok" });
      const gen = await call(base, "POST", "/generate", { input_ids: prompt, sampling_params: greedy() });
      expect(gen.status).toBe(200);
    });
  });
}
