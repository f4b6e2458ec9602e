/**
 * A fake SGLang server that speaks the native HTTP protocol of ../shared/reference/sglang.md faithfully (shapes,
 * status codes, finish reasons, batch and `n` ordering, abort semantics, auth), with a scripted "model" and
 * fault injection. It runs on node:http at 127.0.0.1 and a free port. Only Node built-ins are imported, so
 * bench/ can load it after a plain transpile.
 *
 *   const fake = await startFakeSglang({ script: [{ suffix: [42], output: [7, 8, 151645] }] });
 *   ... new SglangClient({ servers: [fake.url] }) ...
 *   await fake.close();
 */
import { randomUUID } from "node:crypto";
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { FaultInjector, type Fault, type FaultPlan } from "./faults.js";
import {
  cutOutput,
  defaultOutput,
  matchesScript,
  type RespondFn,
  type RespondResult,
  type Sampled,
  type ScriptEntry,
  type WireSamplingParams,
} from "./generation.js";

export { fakeLogprob, type RespondContext, type RespondFn, type ScriptEntry, type WireSamplingParams } from "./generation.js";
export { seededRandom, type Fault, type FaultPlan, type FaultRequest } from "./faults.js";

export interface FakeSglangOptions {
  /** 0 picks a free port. */
  port?: number;
  /** Require `Authorization: Bearer <apiKey>` everywhere except /health*, /metrics. */
  apiKey?: string;
  /** Scripted replies, tried in order before `respond`. */
  script?: ScriptEntry[];
  /** Computes the reply when no script entry matches. Default: a prompt-hashed sequence ending in EOS. */
  respond?: RespondFn;
  /** EOS ids (Qwen3: 151645 <|im_end|>, 151643 <|endoftext|>). @default [151645, 151643] */
  eosTokenIds?: number[];
  /** Tokens the default model emits before its EOS. @default 16 */
  defaultLength?: number;
  /** @default 40960 */
  contextLength?: number;
  /** @default 151936 */
  vocabSize?: number;
  /** @default "fake/Qwen3-0.6B" */
  modelPath?: string;
  /** @default "default" */
  weightVersion?: string;
  /** Delay before every /generate answer (abortable, like a real generation). @default 0 */
  latencyMs?: number;
  /**
   * An item aborted while it generates answers with the tokens it had "decoded" so far, as SGLang does: the share of
   * its output that its latency had covered. Off, an abort answers with no tokens. @default false
   */
  partialAbort?: boolean;
  /**
   * Items generating at once, like SGLang's `max_running_requests`: the others wait in a FIFO queue, and their
   * latency starts when they get a slot. An item aborted or disconnected while waiting leaves the queue. With a
   * latency this makes a server whose response time grows with the load. @default unlimited
   */
  capacity?: number;
  /** Text for `text`; the default writes `<id>` per token. */
  decode?: (ids: number[]) => string;
  /**
   * Serves /init_weights_update_group and /update_weights_from_distributed (a GET answers 405, as SGLang's POST routes
   * do) but refuses every group with this message, as a server whose rendezvous failed. Unset: both are 404.
   */
  refuseWeightGroup?: string;
  /** Decides /update_weights_from_disk; default: success. */
  onUpdateWeights?: (body: Record<string, unknown>) => { success: boolean; message?: string };
  faults?: FaultPlan;
  /** `stats.log` and `stats.rids` keep about this many latest entries, so long benches stay small. @default 10000 */
  maxLogEntries?: number;
}

export interface RequestLogEntry {
  method: string;
  path: string;
  body: unknown;
  /** The Authorization header as received (tests check the client sends it). */
  authorization: string | undefined;
}

export interface FakeSglangStats {
  requests: number;
  byPath: Record<string, number>;
  /** /generate items answered (batch items and n samples counted one by one). */
  samples: number;
  /** Items ended by /abort_request, pause(abort) or an `abort` fault. */
  aborted: number;
  /** /generate requests whose client went away before the answer. */
  disconnects: number;
  faults: Record<string, number>;
  /** Every request, in arrival order. */
  log: RequestLogEntry[];
  /** rid of every /generate item, in arrival order. */
  rids: string[];
  /**
   * For each /generate item, in arrival order: the items ahead of it in the server (running, or waiting for one of
   * `capacity`'s slots) when it arrived. With a latency and a capacity, this says how long its queue wait is by the
   * server's schedule, whatever the machine's timers do.
   */
  depthsAtArrival: number[];
  /**
   * Arrival positions (indexes into the items `depthsAtArrival` counts, from the first) of the /generate items aborted
   * before their answer, by /abort_request or by their client's disconnect: a client-side timeout, in a test that
   * injects no resets and pauses nothing.
   */
  abortedUnanswered: number[];
}

export interface FakeSglang {
  url: string;
  port: number;
  readonly stats: FakeSglangStats;
  /** Replaces the fault plan. */
  setFaults(plan: FaultPlan): void;
  /** Changes the reply function (scripts are kept and tried first). */
  setRespond(respond: RespondFn | undefined): void;
  /** Makes /health and /health_generate answer 503 (false) or 200 (true). */
  setHealthy(healthy: boolean): void;
  /** Generate items currently running (not yet answered). */
  inFlight(): number;
  weightVersion(): string;
  /** Stops listening and drops every connection; state (weights, stats) is kept. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  restart(): Promise<void>;
  close(): Promise<void>;
  resetStats(): void;
}

const SUCCESS_PAUSE = { message: "Generation paused successfully.", status: "ok" };
const SUCCESS_CONTINUE = { message: "Generation continued successfully.", status: "ok" };

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`HTTP ${status}`);
  }
}

/** SGLang's `{"error":{"message"}}` 400 shape, used for validation failures of /generate. */
function badRequest(message: string): HttpError {
  return new HttpError(400, { error: { message } });
}

/** FastAPI request-validation failures, which SGLang turns into a 400 (not 422). */
function validationError(message: string): HttpError {
  return new HttpError(400, { object: "error", message, type: "Bad Request", param: null, code: 400 });
}

/** One /generate item while it runs: `abort` ends it early with finish_reason abort. */
interface LiveItem {
  rid: string;
  abort(message: string): void;
}

interface Waiter {
  resolve(): void;
}

export async function startFakeSglang(options: FakeSglangOptions = {}): Promise<FakeSglang> {
  const eosTokenIds = options.eosTokenIds ?? [151645, 151643];
  const contextLength = options.contextLength ?? 40960;
  const vocabSize = options.vocabSize ?? 151936;
  const defaultLength = options.defaultLength ?? 16;
  const decode = options.decode ?? ((ids: number[]) => ids.map((id) => `<${id}>`).join(""));
  const faults = new FaultInjector(options.faults);
  const script = options.script ?? [];
  let respond = options.respond;
  let modelPath = options.modelPath ?? "fake/Qwen3-0.6B";
  let weightVersion = options.weightVersion ?? "default";
  let healthy = true;
  let paused = false;
  let callIndex = 0;
  const live = new Map<string, LiveItem>();
  let unpauseWaiters: Waiter[] = [];
  let idleWaiters: Waiter[] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let running = 0;
  const waitingForSlot: Array<() => void> = [];

  const freshStats = (): FakeSglangStats => ({
    requests: 0,
    byPath: {},
    samples: 0,
    aborted: 0,
    disconnects: 0,
    faults: {},
    log: [],
    rids: [],
    depthsAtArrival: [],
    abortedUnanswered: [],
  });
  let arrivals = 0;
  let stats = freshStats();

  const maxLog = options.maxLogEntries ?? 10_000;
  /** Drops the oldest entries in one splice once a list is twice the cap, so trimming stays cheap. */
  function trim(list: unknown[]): void {
    if (list.length > 2 * maxLog) list.splice(0, list.length - maxLog);
  }

  function later(ms: number, fn: () => void): NodeJS.Timeout {
    const timer = setTimeout(() => {
      timers.delete(timer);
      fn();
    }, ms);
    timers.add(timer);
    return timer;
  }

  function notifyIdle(): void {
    if (live.size > 0) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    for (const w of waiters) w.resolve();
  }

  function abortAll(message: string): void {
    for (const item of [...live.values()]) item.abort(message);
  }

  // ---- /generate --------------------------------------------------------------------------------------

  interface Item {
    inputIds: number[];
    params: WireSamplingParams;
    rid: string;
    sampleIndex: number;
  }

  function expandItems(body: Record<string, unknown>): { items: Item[]; batched: boolean } {
    // Streaming is not faked; failing loudly beats answering a streaming client with the wrong framing.
    if (body.stream === true) throw badRequest("The fake SGLang server does not stream: send stream=false.");
    if (body.text !== undefined && body.input_ids === undefined) {
      throw badRequest("The fake SGLang server has no tokenizer: send input_ids instead of text.");
    }
    const rawIds = body.input_ids;
    if (rawIds === undefined || rawIds === null) {
      throw badRequest("Either text, input_ids or input_embeds should be provided.");
    }
    if (!Array.isArray(rawIds)) throw validationError("input_ids must be a list of integers or a list of lists");
    if (rawIds.length === 0) throw badRequest("input_ids cannot be empty.");
    const batched = Array.isArray(rawIds[0]);
    const prompts = (batched ? rawIds : [rawIds]) as unknown[];
    for (const prompt of prompts) {
      if (!Array.isArray(prompt) || !prompt.every((id) => Number.isInteger(id))) {
        throw validationError("input_ids must contain integers only");
      }
      if (prompt.length === 0) throw badRequest("input_ids cannot be empty.");
    }
    const paramsList = Array.isArray(body.sampling_params)
      ? (body.sampling_params as WireSamplingParams[])
      : prompts.map(() => (body.sampling_params ?? {}) as WireSamplingParams);
    if (paramsList.length !== prompts.length) {
      throw badRequest("The number of sampling_params must match the number of prompts.");
    }
    const ns = paramsList.map((p) => p.n ?? 1);
    const n = ns[0] ?? 1;
    if (ns.some((x) => x !== n)) throw badRequest("The parallel_sample_num should be the same for all samples in sample params.");
    paramsList.forEach(validateSamplingParams);
    paramsList.forEach((params, i) => {
      const prompt = prompts[i] as number[];
      const maxNew = params.max_new_tokens ?? 128;
      if (prompt.length + maxNew > contextLength) {
        throw badRequest(
          `Requested token count exceeds the model's maximum context length of ${contextLength} tokens. ` +
            `You requested a total of ${prompt.length + maxNew} tokens: ${prompt.length} tokens from the input messages and ` +
            `${maxNew} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.`,
        );
      }
    });
    // rids: a string becomes "{rid}_{i}" in a batch; with n > 1 SGLang regenerates them as fresh uuids.
    let rids: string[];
    if (n > 1) {
      rids = [];
    } else if (Array.isArray(body.rid)) {
      if (body.rid.length !== prompts.length) throw badRequest("The rid should be a list with the same length as the batch.");
      rids = body.rid.map(String);
    } else if (typeof body.rid === "string") {
      rids = batched ? prompts.map((_, i) => `${body.rid}_${i}`) : [body.rid];
    } else {
      rids = prompts.map(() => randomUUID().replaceAll("-", ""));
    }
    if (new Set(rids).size !== rids.length) throw badRequest(`Duplicate request IDs detected within the request: ${rids.join(", ")}`);
    for (const rid of rids) if (live.has(rid)) throw badRequest(`Duplicate request ID detected: ${rid}`);
    const items: Item[] = [];
    prompts.forEach((prompt, i) => {
      for (let j = 0; j < n; j++) {
        items.push({
          inputIds: prompt as number[],
          params: paramsList[i]!,
          rid: n > 1 ? randomUUID().replaceAll("-", "") : rids[i]!,
          sampleIndex: j,
        });
      }
    });
    return { items, batched: batched || n > 1 };
  }

  function validateSamplingParams(p: WireSamplingParams): void {
    const maxNew = p.max_new_tokens;
    if (maxNew != null && (!Number.isInteger(maxNew) || maxNew < 0)) {
      throw badRequest(`max_new_tokens must be at least 0, got ${maxNew}.`);
    }
    if (p.temperature != null && p.temperature < 0) throw badRequest(`temperature must be non-negative, got ${p.temperature}.`);
    if (p.top_p != null && (p.top_p <= 0 || p.top_p > 1)) throw badRequest(`top_p must be in (0, 1], got ${p.top_p}.`);
    if (p.top_k != null && (p.top_k < -1 || p.top_k === 0)) {
      throw badRequest(`top_k must be -1 (disable), or at least 1, got ${p.top_k}.`);
    }
  }

  async function sample(item: Item): Promise<Sampled> {
    const index = callIndex++;
    const ctx = { callIndex: index, rid: item.rid, sampleIndex: item.sampleIndex };
    const entry = script.find((e) => matchesScript(e, item.inputIds, index));
    let wanted: RespondResult;
    if (entry) wanted = entry.logprobs ? { outputIds: entry.output, logprobs: entry.logprobs } : entry.output;
    else if (respond) wanted = await respond(item.inputIds, item.params, ctx);
    else wanted = defaultOutput(item.inputIds, item.params, ctx, { eosTokenIds, defaultLength, vocabSize });
    return Array.isArray(wanted)
      ? cutOutput(wanted, undefined, item.params, eosTokenIds)
      : cutOutput(wanted.outputIds, wanted.logprobs, item.params, eosTokenIds);
  }

  /** Runs one item: waits out latency and pauses, unless aborted first. */
  function runItem(item: Item, fault: Fault | null, returnLogprob: boolean, topLogprobsNum = 0): Promise<Record<string, unknown>> {
    const started = Date.now();
    // Its position among the /generate items that arrived since the stats were last reset.
    const arrival = arrivals++;
    return new Promise((resolve, reject) => {
      let done = false;
      let timer: NodeJS.Timeout | undefined;
      let holdsSlot = false;
      const start = () => {
        holdsSlot = true;
        decodeStarted = Date.now();
        const delay = (options.latencyMs ?? 0) + (fault?.type === "latency" ? fault.ms : 0);
        if (delay > 0) timer = later(delay, () => void generate());
        else void generate();
      };
      const leaveSlot = () => {
        if (!holdsSlot) {
          const index = waitingForSlot.indexOf(start);
          if (index >= 0) waitingForSlot.splice(index, 1);
          return;
        }
        holdsSlot = false;
        running--;
        const next = waitingForSlot.shift();
        if (next) {
          running++;
          next();
        }
      };
      const finish = (sampled: Sampled) => {
        if (done) return;
        done = true;
        if (timer) clearTimeout(timer);
        leaveSlot();
        live.delete(item.rid);
        stats.samples++;
        if (sampled.finishReason.type === "abort") stats.aborted++;
        resolve(responseObject(item, sampled, returnLogprob, (Date.now() - started) / 1000, topLogprobsNum));
        notifyIdle();
      };
      const abortedResult = (message: string): Sampled => ({
        outputIds: [],
        logprobs: [],
        finishReason: { type: "abort", message, status_code: null, err_type: null },
      });
      let decodeStarted: number | undefined;
      const abortPartly = async (message: string) => {
        if (timer) clearTimeout(timer);
        const delay = (options.latencyMs ?? 0) + (fault?.type === "latency" ? fault.ms : 0);
        const share = delay > 0 ? Math.min(1, (Date.now() - decodeStarted!) / delay) : 0;
        const sampled = await sample(item);
        const n = Math.min(sampled.outputIds.length - 1, Math.floor(sampled.outputIds.length * share));
        const abort = abortedResult(message);
        finish({ ...abort, outputIds: sampled.outputIds.slice(0, Math.max(0, n)), logprobs: sampled.logprobs.slice(0, Math.max(0, n)) });
      };
      let aborting = false;
      const abortItem = (message: string) => {
        if (done || aborting) return;
        stats.abortedUnanswered.push(arrival);
        trim(stats.abortedUnanswered);
        if (options.partialAbort && decodeStarted !== undefined) {
          // Still generating: the timer must not answer while the partial answer is sampled.
          aborting = true;
          void abortPartly(message).catch(reject);
          return;
        }
        finish(abortedResult(message));
      };
      live.set(item.rid, { rid: item.rid, abort: abortItem });
      const generate = async () => {
        if (done || aborting) return;
        if (paused) {
          await new Promise<void>((r) => unpauseWaiters.push({ resolve: r }));
          if (done) return;
        }
        try {
          const sampled = await sample(item);
          if (fault?.type === "abort") {
            const half = Math.floor(sampled.outputIds.length / 2);
            finish({
              outputIds: sampled.outputIds.slice(0, half),
              logprobs: sampled.logprobs.slice(0, half),
              finishReason: { type: "abort", message: fault.message ?? "Abort in running queue.", status_code: null, err_type: null },
            });
          } else finish(sampled);
        } catch (err) {
          done = true;
          leaveSlot();
          live.delete(item.rid);
          notifyIdle();
          reject(err);
        }
      };
      stats.depthsAtArrival.push(running + waitingForSlot.length);
      trim(stats.depthsAtArrival);
      if (options.capacity === undefined || running < options.capacity) {
        running++;
        start();
      } else waitingForSlot.push(start);
    });
  }

  /**
   * SGLang's `output_top_logprobs` entry for one position: `count` `[logprob, id, null]`, most likely first. The fake's
   * are the sampled token with its own logprob, then the next ids (7 apart) each half a nat less likely, so a test can
   * predict every one.
   */
  function topAlternatives(id: number, logprob: number, count: number): Array<[number, number, null]> {
    return Array.from({ length: count }, (_, j) => [logprob - 0.5 * j, (id + 7 * j) % vocabSize, null]);
  }

  function responseObject(item: Item, sampled: Sampled, returnLogprob: boolean, latency: number, topLogprobsNum = 0): Record<string, unknown> {
    const matchedStop = sampled.finishReason.type === "stop";
    // A matched stop / EOS token is dropped before decoding, but output_ids keeps it (sglang.md §1 Trimming).
    const textIds = matchedStop ? sampled.outputIds.slice(0, -1) : sampled.outputIds;
    const meta: Record<string, unknown> = {
      id: item.rid,
      finish_reason: sampled.finishReason,
      prompt_tokens: item.inputIds.length,
      weight_version: weightVersion,
      total_retractions: 0,
      completion_tokens: sampled.outputIds.length,
      cached_tokens: 0,
      reasoning_tokens: 0,
      e2e_latency: latency,
      num_retractions: 0,
    };
    if (returnLogprob) {
      meta.input_token_logprobs = [];
      meta.output_token_logprobs = sampled.outputIds.map((id, i) => [sampled.logprobs[i], id, null]);
      meta.input_top_logprobs = [];
      meta.output_top_logprobs = topLogprobsNum > 0 ? sampled.outputIds.map((id, i) => topAlternatives(id, sampled.logprobs[i]!, topLogprobsNum)) : [];
      meta.output_token_logprobs_length = sampled.outputIds.length;
    }
    return { text: decode(textIds), output_ids: sampled.outputIds, meta_info: meta };
  }

  async function handleGenerate(
    body: Record<string, unknown>,
    fault: Fault | null,
    res: http.ServerResponse,
    onClientGone: (cb: () => void) => void,
  ): Promise<void> {
    const { items, batched } = expandItems(body);
    for (const item of items) stats.rids.push(item.rid);
    trim(stats.rids);
    // A client that disconnects aborts its request, as in SGLang.
    onClientGone(() => {
      stats.disconnects++;
      for (const item of items) live.get(item.rid)?.abort("client disconnected");
    });
    // SGLang warms the prefix cache with a max_new_tokens=0 pass before n samples; it does not change the answer.
    const returnLogprob = body.return_logprob === true;
    const topLogprobsNum = typeof body.top_logprobs_num === "number" ? body.top_logprobs_num : 0;
    const results = await Promise.all(items.map((item) => runItem(item, fault, returnLogprob, topLogprobsNum)));
    if (res.destroyed || res.socket?.destroyed) return;
    const payload = batched ? results : results[0];
    if (fault?.type === "drip") return drip(res, JSON.stringify(payload), fault);
    sendJson(res, 200, payload);
  }

  function drip(res: http.ServerResponse, text: string, fault: Extract<Fault, { type: "drip" }>): void {
    const bytes = Buffer.from(text);
    const chunk = Math.max(1, fault.chunkBytes ?? 16);
    res.writeHead(200, { "content-type": "application/json", "content-length": String(bytes.length) });
    let offset = 0;
    const step = () => {
      if (res.destroyed) return;
      if (fault.cutAfterBytes !== undefined && offset >= fault.cutAfterBytes) {
        res.socket?.destroy();
        return;
      }
      const end = Math.min(bytes.length, offset + chunk, fault.cutAfterBytes ?? Infinity);
      res.write(bytes.subarray(offset, end));
      offset = end;
      if (offset >= bytes.length) res.end();
      else later(fault.intervalMs, step);
    };
    step();
  }

  // ---- admin endpoints ------------------------------------------------------------------------------------

  function modelInfo(): Record<string, unknown> {
    return {
      model_path: modelPath,
      tokenizer_path: modelPath,
      is_generation: true,
      preferred_sampling_params: null,
      weight_version: weightVersion,
      has_image_understanding: false,
      has_audio_understanding: false,
      model_type: "qwen3",
      architectures: ["Qwen3ForCausalLM"],
    };
  }

  function serverInfo(): Record<string, unknown> {
    return {
      model_path: modelPath,
      tokenizer_path: modelPath,
      host: "127.0.0.1",
      port,
      context_length: contextLength,
      api_key: options.apiKey === undefined ? null : "<redacted>",
      tp_size: 1,
      dp_size: 1,
      weight_version: weightVersion,
      max_total_num_tokens: contextLength * 8,
      internal_states: [{ last_gen_throughput: 0, memory_usage: {} }],
      version: "fake-sglang-0.1",
      kv_events: null,
    };
  }

  async function updateWeights(body: Record<string, unknown>): Promise<[number, unknown]> {
    if (typeof body.model_path !== "string") {
      throw validationError("[{'type': 'missing', 'loc': ('body', 'model_path'), 'msg': 'Field required'}]");
    }
    if (body.abort_all_requests === true) abortAll("Abort due to update_weights_from_disk with abort_all_requests.");
    // It takes the writer lock: in-flight generations finish first unless generation is paused.
    if (!paused && live.size > 0) await new Promise<void>((r) => idleWaiters.push({ resolve: r }));
    const verdict = options.onUpdateWeights?.(body) ?? { success: true };
    if (!verdict.success) {
      return [400, { success: false, message: verdict.message ?? "Failed to update weights.", num_paused_requests: 0 }];
    }
    modelPath = body.model_path;
    if (typeof body.weight_version === "string") weightVersion = body.weight_version;
    return [200, { success: true, message: verdict.message ?? "Succeeded to update model weights.", num_paused_requests: 0 }];
  }

  function memoryCall(): [number, unknown] {
    // SGLang asserts the scheduler is idle; the assertion surfaces as a 400.
    if (live.size > 0) return [400, { error: { message: "release/resume memory occupation requires an idle server" } }];
    return [200, null];
  }

  // ---- HTTP plumbing ------------------------------------------------------------------------------------

  function sendJson(res: http.ServerResponse, status: number, payload: unknown, headers: Record<string, string> = {}): void {
    if (res.destroyed || res.headersSent || res.socket?.destroyed) return;
    const text = JSON.stringify(payload);
    res.writeHead(status, { "content-type": "application/json", "content-length": String(Buffer.byteLength(text)), ...headers });
    res.end(text);
  }

  function sendText(res: http.ServerResponse, status: number, text: string): void {
    if (res.destroyed || res.headersSent) return;
    res.writeHead(status, { "content-type": "text/plain; charset=utf-8", "content-length": String(Buffer.byteLength(text)) });
    res.end(text);
  }

  function readBody(req: http.IncomingMessage): Promise<string> {
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
      req.on("error", reject);
    });
  }

  function parseJsonBody(text: string): Record<string, unknown> {
    if (text.trim() === "") return {};
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      throw validationError("JSON decode error");
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) throw validationError("body must be a JSON object");
    return value as Record<string, unknown>;
  }

  async function route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://fake");
    const path = url.pathname;
    const method = req.method ?? "GET";
    const rawBody = await readBody(req);
    stats.requests++;
    stats.byPath[path] = (stats.byPath[path] ?? 0) + 1;
    let body: unknown = rawBody;
    try {
      body = rawBody.trim() === "" ? undefined : JSON.parse(rawBody);
    } catch {
      // logged raw
    }
    stats.log.push({ method, path, body, authorization: req.headers.authorization });
    trim(stats.log);

    const open = path.startsWith("/health") || path.startsWith("/metrics");
    if (options.apiKey !== undefined && !open && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      return sendJson(res, 401, { error: "Unauthorized" });
    }

    const fault = faults.next(path, body);
    if (fault) stats.faults[fault.type] = (stats.faults[fault.type] ?? 0) + 1;
    if (fault?.type === "reset") {
      req.socket.destroy();
      return;
    }
    if (fault?.type === "hang") return; // the socket stays open until the client or stop() ends it
    if (fault?.type === "status") {
      const defaultBody = fault.status === 429 ? { error: { message: "Too many requests" } } : { detail: `fake fault: HTTP ${fault.status}` };
      return sendJson(res, fault.status, fault.body ?? defaultBody, fault.retryAfter !== undefined ? { "retry-after": String(fault.retryAfter) } : {});
    }
    if (fault?.type === "wrong-shape") return sendJson(res, 200, { output_ids: "not a list", meta_info: { id: 1 } });
    if (fault?.type === "malformed-json") {
      const garbled = '{"text": "<1><2>", "output_ids": [1, 2';
      res.writeHead(200, { "content-type": "application/json", "content-length": String(Buffer.byteLength(garbled)) });
      res.end(garbled);
      return;
    }

    const json = () => parseJsonBody(rawBody);
    const is = (...methods: string[]) => methods.includes(method);

    if (path === "/generate" && is("POST", "PUT")) {
      const onClientGone = (cb: () => void) =>
        res.on("close", () => {
          if (!res.writableFinished) cb();
        });
      return handleGenerate(json(), fault, res, onClientGone);
    }
    if ((path === "/health" || path === "/health_generate") && is("GET")) {
      res.writeHead(healthy ? 200 : 503, { "content-length": "0" });
      res.end();
      return;
    }
    if ((path === "/model_info" || path === "/get_model_info") && is("GET")) return sendJson(res, 200, modelInfo());
    if ((path === "/server_info" || path === "/get_server_info") && is("GET")) return sendJson(res, 200, serverInfo());
    if (path === "/v1/models" && is("GET")) {
      return sendJson(res, 200, {
        object: "list",
        data: [{ id: modelPath, object: "model", created: 0, owned_by: "sglang", root: modelPath, parent: null, max_model_len: contextLength }],
      });
    }
    if (path === "/flush_cache" && is("GET", "POST")) {
      if (live.size > 0) return sendText(res, 400, "Cache not flushed: there are running or waiting requests.\n");
      return sendText(
        res,
        200,
        "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n",
      );
    }
    if (path === "/update_weights_from_disk" && is("POST")) {
      const [status, payload] = await updateWeights(json());
      return sendJson(res, status, payload);
    }
    if (options.refuseWeightGroup !== undefined && (path === "/init_weights_update_group" || path === "/update_weights_from_distributed")) {
      if (!is("POST")) return sendJson(res, 405, { detail: "Method Not Allowed" });
      return sendJson(res, 400, { success: false, message: options.refuseWeightGroup });
    }
    if (path === "/abort_request" && is("POST")) {
      const b = json();
      const rid = typeof b.rid === "string" ? b.rid : "";
      if (b.abort_all === true) abortAll("Abort all requests.");
      // With one tokenizer worker SGLang only acts when the exact rid is live; the scheduler then aborts by prefix.
      else if (rid !== "" && live.has(rid)) {
        for (const item of [...live.values()]) if (item.rid.startsWith(rid)) item.abort("Abort requested by /abort_request.");
      }
      res.writeHead(200, { "content-length": "0" });
      res.end();
      return;
    }
    if ((path === "/release_memory_occupation" || path === "/resume_memory_occupation") && is("GET", "POST")) {
      const [status, payload] = memoryCall();
      return sendJson(res, status, payload);
    }
    if (path === "/pause_generation" && is("POST")) {
      const mode = (json().mode as string | undefined) ?? "abort";
      if (!["abort", "retract", "in_place"].includes(mode)) throw validationError(`Input should be 'abort', 'retract' or 'in_place'`);
      paused = true;
      if (mode === "abort") abortAll("Abort due to pause_generation.");
      return sendJson(res, 200, SUCCESS_PAUSE);
    }
    if (path === "/continue_generation" && is("POST")) {
      paused = false;
      const waiters = unpauseWaiters;
      unpauseWaiters = [];
      for (const w of waiters) w.resolve();
      return sendJson(res, 200, SUCCESS_CONTINUE);
    }
    return sendJson(res, 404, { detail: "Not Found" });
  }

  const server = http.createServer((req, res) => {
    route(req, res).catch((err: unknown) => {
      if (err instanceof HttpError) sendJson(res, err.status, err.body);
      else sendJson(res, 500, { error: { message: `fake server bug: ${(err as Error).message}` } });
    });
  });
  server.keepAliveTimeout = 60_000;
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  function listen(onPort: number): Promise<number> {
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(onPort, "127.0.0.1", () => {
        server.off("error", reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  }

  async function stop(): Promise<void> {
    abortAll("server shutting down");
    for (const timer of timers) clearTimeout(timer);
    timers.clear();
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    if (!server.listening) return;
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  const port = await listen(options.port ?? 0);

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get stats() {
      return stats;
    },
    setFaults: (plan) => faults.set(plan),
    setRespond: (fn) => {
      respond = fn;
    },
    setHealthy: (value) => {
      healthy = value;
    },
    inFlight: () => live.size,
    weightVersion: () => weightVersion,
    stop,
    restart: async () => {
      await stop();
      await listen(port);
    },
    close: stop,
    resetStats: () => {
      stats = freshStats();
      arrivals = 0;
    },
  };
}
