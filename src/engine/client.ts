/**
 * The SGLang HTTP client: `/generate` with token ids in and token ids + logprobs out, across one router or
 * several workers, with bounded retries, and the admin endpoints fanned out to every worker (the router does not
 * route them; sglang.md §3). Protocol facts come from ../shared/reference/sglang.md.
 */
import { randomUUID } from "node:crypto";
import type { Dispatcher } from "undici";
import { Agent } from "./undici-agent.js";
import { z } from "zod";
import { UsageError } from "../errors.js";
import { formatIssues } from "../zod-issues.js";
import { EngineConnectionError, EngineServerError } from "./errors.js";
import { sendAttempt, type AttemptOutcome } from "./http.js";
import { AdaptiveLimit, type LoadSignal } from "./adaptive-limit.js";
import { BusyTime } from "./busy-time.js";
import { ServerPool } from "./pool.js";
import type { ServerLoads } from "./server-loads.js";
import { backoffDelayMs, retryAfterMs, sleep } from "./retry.js";
import { callJson, callRaw, callText, type CallContext } from "./simple-call.js";
import type {
  AdminResult,
  EngineStats,
  FailureKind,
  GenerateRequest,
  GenerateResult,
  ModelInfo,
  ServerHealth,
  UpdateWeightsResult,
} from "./types.js";
import {
  errorMessageOf,
  excerpt,
  generateBodyBytes,
  parseGenerateResponse,
  modelInfoSchema,
  serverInfoSchema,
  toGenerateResult,
  toModelInfo,
  toUpdateWeightsResult,
  updateWeightsSchema,
  loraAdapterSchema,
} from "./wire.js";

export interface SglangClientOptions {
  /** Base URLs that take /generate: several workers, or one sglang router. */
  servers: string[];
  /** Base URLs of every worker, for admin calls the router does not route. @default servers */
  workers?: string[];
  /** Sent as `Authorization: Bearer <key>`; never logged or put in an error. */
  apiKey?: string;
  /** Requests expected in flight at once; sizes the connection pool per server. @default 64 */
  concurrency?: number;
  /** @default 10_000 @unit milliseconds */
  connectTimeoutMs?: number;
  /** One /generate attempt, headers and body. @default 600_000 @unit milliseconds */
  requestTimeoutMs?: number;
  /** Admin calls; update_weights_from_disk waits for in-flight requests. @default 600_000 @unit milliseconds */
  adminTimeoutMs?: number;
  /** Retries after the first attempt. @default 3 */
  maxRetries?: number;
  /** @default 500 @unit milliseconds */
  retryBaseDelayMs?: number;
  /** @default 8_000 @unit milliseconds */
  retryMaxDelayMs?: number;
  /** Retry an attempt that timed out before any response byte (its rid is aborted on the server). @default true */
  retryOnTimeout?: boolean;
  /**
   * Keep fewer than `concurrency` attempts in flight while the server shows overload (timeouts while slow, 429, 503),
   * so a slow server does not turn timeouts into a retry storm (adaptive-limit.ts). @default true
   */
  adaptiveConcurrency?: boolean;
  /** How long a server that failed to connect or reset is avoided. @default 5_000 @unit milliseconds */
  unhealthyCooldownMs?: number;
  /**
   * Per-server loads and cool-downs shared with other clients (rollout threads: ServerLoads.shared), so they balance
   * as one pool. @default private to this client
   */
  serverLoads?: ServerLoads;
  /** Injected dispatcher (tests, custom pools); the client then does not own or close it. */
  dispatcher?: Dispatcher;
  /** Randomness for jitter. @default Math.random */
  random?: () => number;
  /** Milliseconds, for the engine's busy time (busySeconds). @default performance.now */
  clock?: () => number;
}

const DEFAULTS = {
  concurrency: 64,
  connectTimeoutMs: 10_000,
  requestTimeoutMs: 600_000,
  adminTimeoutMs: 600_000,
  maxRetries: 3,
  retryBaseDelayMs: 500,
  retryMaxDelayMs: 8_000,
  retryOnTimeout: true,
  adaptiveConcurrency: true,
  unhealthyCooldownMs: 5_000,
} as const;

/** Best-effort /abort_request calls get this long; nobody waits on their result. */
const ABORT_CALL_TIMEOUT_MS = 5_000;
/** Connections per server for control calls: a sync's few calls, a burst of per-request aborts, health checks. */
const ADMIN_CONNECTIONS = 16;
/** SGLang's /health runs a 1-token generation and gives up after SGLANG_HEALTH_CHECK_TIMEOUT (20 s). */
const HEALTH_TIMEOUT_MS = 25_000;

const FAILURE_KINDS: FailureKind[] = [
  "connect",
  "reset",
  "timeout",
  "partial_body",
  "http_4xx",
  "http_5xx",
  "http_429",
  "bad_response",
];

function zeroCounts(): Record<FailureKind, number> {
  return Object.fromEntries(FAILURE_KINDS.map((kind) => [kind, 0])) as Record<FailureKind, number>;
}

export function newRid(): string {
  return randomUUID().replaceAll("-", "");
}

function trimSlash(url: string): string {
  return url.endsWith("/") ? url.slice(0, -1) : url;
}

/** Checks a server URL from the user (flag or config) and drops a trailing slash. */
function serverUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`server URL ${JSON.stringify(url)} is not a URL`, { hint: "write it like http://127.0.0.1:30000" });
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new UsageError(`server URL ${JSON.stringify(url)} must start with http:// or https://`);
  }
  return trimSlash(url);
}

/** What an attempt's verdict says about the server's load, for the adaptive limit. */
function loadSignalOf(verdict: Verdict): LoadSignal {
  if (verdict.action === "done") return "ok";
  if (verdict.action !== "retry") return "neutral";
  if (verdict.kind === "timeout") return "timeout";
  const status = verdict.error instanceof EngineServerError ? verdict.error.status : undefined;
  return verdict.kind === "http_429" || status === 503 ? "overloaded" : "neutral";
}

/** What the retry loop does after one attempt. */
type Verdict =
  | { action: "done"; result: GenerateResult }
  | { action: "cancelled" }
  | { action: "retry"; kind: FailureKind; error: Error; delayMs?: number }
  | { action: "fail"; error: EngineConnectionError | EngineServerError };

export class SglangClient {
  private readonly options: Required<Omit<SglangClientOptions, "apiKey" | "dispatcher" | "workers" | "serverLoads" | "clock">>;
  private readonly workers: string[];
  private readonly pool: ServerPool;
  private readonly limit: AdaptiveLimit;
  private readonly dispatcher: Dispatcher;
  /**
   * The control calls' own connections (pause, continue, weight updates, aborts, health): on the generations' pool
   * they queued behind the generations holding every connection, and a weight sync that paused the engine waited
   * on generations that waited on it, until the request timeout.
   */
  private readonly adminDispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  // A private class field, so neither console.log(client) nor JSON.stringify(client) shows the key.
  readonly #apiKey: string | undefined;
  private readonly pendingAborts = new Set<Promise<void>>();
  private readonly busy: BusyTime;
  /** Pauses opened plus pauses closed (pauseGeneration, continueGeneration): odd while generation is paused. */
  private pauseEdges = 0;
  /**
   * The LoRA adapter every /generate names in `lora_path` (null: the base model). The weight sync sets it to the
   * adapter it loaded, so a request sent after a sync, a partial rollout's continuation too, runs the new adapter.
   */
  loraAdapter: string | null = null;
  private readonly counters = {
    requests: 0,
    retries: 0,
    successes: 0,
    abortedByCaller: 0,
    failures: zeroCounts(),
    attemptErrors: zeroCounts(),
  };

  constructor(options: SglangClientOptions) {
    if (options.servers.length === 0) throw new UsageError("no SGLang server given", { hint: "pass --server URL" });
    this.options = {
      concurrency: options.concurrency ?? DEFAULTS.concurrency,
      connectTimeoutMs: options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
      requestTimeoutMs: options.requestTimeoutMs ?? DEFAULTS.requestTimeoutMs,
      adminTimeoutMs: options.adminTimeoutMs ?? DEFAULTS.adminTimeoutMs,
      maxRetries: options.maxRetries ?? DEFAULTS.maxRetries,
      retryBaseDelayMs: options.retryBaseDelayMs ?? DEFAULTS.retryBaseDelayMs,
      retryMaxDelayMs: options.retryMaxDelayMs ?? DEFAULTS.retryMaxDelayMs,
      retryOnTimeout: options.retryOnTimeout ?? DEFAULTS.retryOnTimeout,
      adaptiveConcurrency: options.adaptiveConcurrency ?? DEFAULTS.adaptiveConcurrency,
      unhealthyCooldownMs: options.unhealthyCooldownMs ?? DEFAULTS.unhealthyCooldownMs,
      random: options.random ?? Math.random,
      servers: options.servers.map(serverUrl),
    };
    this.workers = (options.workers ?? options.servers).map(serverUrl);
    this.limit = new AdaptiveLimit({
      max: Math.max(1, this.options.concurrency),
      requestTimeoutMs: this.options.requestTimeoutMs,
      enabled: this.options.adaptiveConcurrency,
    });
    this.#apiKey = options.apiKey;
    this.busy = new BusyTime(options.clock);
    this.pool = new ServerPool(this.options.servers, {
      unhealthyCooldownMs: this.options.unhealthyCooldownMs,
      maxStickyKeys: Math.max(10_000, this.options.concurrency * 4),
      ...(options.serverLoads ? { loads: options.serverLoads } : {}),
    });
    if (options.dispatcher) {
      this.dispatcher = options.dispatcher;
      this.adminDispatcher = options.dispatcher;
      this.ownsDispatcher = false;
    } else {
      const agent = (connections: number) =>
        new Agent({ connections, connect: { timeout: this.options.connectTimeoutMs }, keepAliveTimeout: 30_000 });
      // One connection per request in flight: SGLang holds a /generate open for the whole generation.
      this.dispatcher = agent(Math.max(1, this.options.concurrency));
      this.adminDispatcher = agent(ADMIN_CONNECTIONS);
      this.ownsDispatcher = true;
    }
  }

  /** What the one-shot calls of simple-call.ts need; admin calls default to adminTimeoutMs. */
  private get callContext(): CallContext {
    return { dispatcher: this.adminDispatcher, headers: (json) => this.headers(json), timeoutMs: this.options.adminTimeoutMs };
  }

  private headers(json: boolean): Record<string, string> {
    const headers: Record<string, string> = {};
    if (json) headers["content-type"] = "application/json";
    if (this.#apiKey !== undefined) headers.authorization = `Bearer ${this.#apiKey}`;
    return headers;
  }

  /**
   * One generation turn. Returns the result (including SGLang's own `abort` finish) or, when the caller's
   * signal fired, a result with `abortedByCaller: true`. Throws EngineConnectionError / EngineServerError once
   * retries are exhausted or the failure is not retryable (4xx, a 2xx JSON body of the wrong shape). Connection
   * failures, resets, timeouts, 5xx, 429, cut bodies and malformed JSON are retried with jittered, capped backoff.
   */
  async generate(req: GenerateRequest): Promise<GenerateResult> {
    let lastServer: string | undefined;
    let lastError: { kind: FailureKind; error: Error } | undefined;
    for (let attempt = 0; attempt <= this.options.maxRetries; attempt++) {
      // A retry gets a fresh rid: the old one may still be live on the server, and SGLang aborts by rid prefix.
      const rid = attempt === 0 && req.rid !== undefined ? req.rid : newRid();
      const slot = await this.limit.acquire(req.signal);
      // Cancelled while waiting for a slot: nothing was sent, so no server is picked (picking pins the sticky key).
      if (slot === null) return this.cancelled(lastServer ?? this.pool.peek(req.stickyKey), null, attempt);
      const server = this.pool.pick(req.stickyKey, lastServer);
      lastServer = server;
      const pausesAtSend = this.pauseEdges;
      this.counters.requests++;
      this.pool.acquire(server);
      this.busy.begin();
      let outcome: AttemptOutcome;
      try {
        outcome = await sendAttempt({
          dispatcher: this.dispatcher,
          url: `${server}/generate`,
          method: "POST",
          headers: this.headers(true),
          body: generateBodyBytes(req, { rid, loraPath: this.loraAdapter }),
          timeoutMs: this.options.requestTimeoutMs,
          ...(req.signal ? { signal: req.signal } : {}),
        });
      } finally {
        this.busy.end();
        this.pool.release(server);
      }
      const verdict = this.judge(outcome, server, rid, attempt + 1, Boolean(req.topLogprobs));
      slot.release(loadSignalOf(verdict));
      if (verdict.action === "done") {
        this.counters.successes++;
        verdict.result.preempted = verdict.result.finishReason.type === "abort" && this.pausedSince(pausesAtSend);
        return verdict.result;
      }
      if (verdict.action === "cancelled") return this.cancelled(server, rid, attempt + 1);
      if (verdict.action === "fail") {
        this.counters.attemptErrors[verdict.error.kind]++;
        this.counters.failures[verdict.error.kind]++;
        throw verdict.error;
      }
      this.counters.attemptErrors[verdict.kind]++;
      lastError = { kind: verdict.kind, error: verdict.error };
      if (attempt === this.options.maxRetries) break;
      this.counters.retries++;
      const delay =
        verdict.delayMs ??
        backoffDelayMs(attempt, {
          baseDelayMs: this.options.retryBaseDelayMs,
          maxDelayMs: this.options.retryMaxDelayMs,
          random: this.options.random,
        });
      const slept = await sleep(delay, req.signal);
      if (!slept) return this.cancelled(server, null, attempt + 1);
    }
    // Retries exhausted on a retryable failure.
    const final = lastError!;
    this.counters.failures[final.kind]++;
    const attempts = this.options.maxRetries + 1;
    const message = `/generate failed after ${attempts} attempts (last on ${lastServer}): ${final.error.message}`;
    if (final.error instanceof EngineServerError) {
      throw new EngineServerError(message, final.error.status, final.error.bodyExcerpt, final.kind, lastServer!, attempts, {
        cause: final.error,
      });
    }
    throw new EngineConnectionError(message, final.kind, lastServer!, attempts, {
      cause: final.error,
      hint: "check that the SGLang server is up and answering (agentrl doctor), or raise the request timeout",
    });
  }

  /** Maps one attempt's outcome to what the retry loop does next. */
  private judge(outcome: AttemptOutcome, server: string, rid: string, attempts: number, topLogprobs = false): Verdict {
    if (outcome.kind === "cancelled") return { action: "cancelled" };
    if (outcome.kind === "failed") {
      const message = `${outcome.failure} on ${server}/generate: ${outcome.error.message}`;
      if (outcome.failure === "connect" || outcome.failure === "reset") this.pool.markUnhealthy(server);
      if (outcome.failure === "timeout") {
        // The server may still be generating for this rid: free its slot before trying elsewhere.
        this.abortOnServer(server, rid);
        if (this.options.retryOnTimeout) return { action: "retry", kind: "timeout", error: new Error(message) };
      }
      // A body cut off mid-way is retried too: nothing of it was used, and /generate is safe to repeat (with a
      // fixed sampling seed it even samples the same answer; without one, only the retried answer is ever kept).
      if (outcome.failure === "connect" || outcome.failure === "reset" || outcome.failure === "partial_body") {
        return { action: "retry", kind: outcome.failure, error: new Error(message, { cause: outcome.error }) };
      }
      return {
        action: "fail",
        error: new EngineConnectionError(message, outcome.failure, server, attempts, { cause: outcome.error }),
      };
    }
    const { status, bodyText, headers } = outcome;
    if (status >= 200 && status < 300) return this.parseGenerate(bodyText, server, attempts, topLogprobs);
    const serverMessage = errorMessageOf(bodyText);
    const message = `${server}/generate answered HTTP ${status}: ${serverMessage}`;
    const kind: FailureKind = status === 429 ? "http_429" : status >= 500 || status === 408 ? "http_5xx" : "http_4xx";
    const error = new EngineServerError(message, status, excerpt(bodyText), kind, server, attempts, {
      ...(status === 401 ? { hint: "the server wants an API key: pass --api-key (or check the one given)" } : {}),
    });
    if (kind === "http_4xx") return { action: "fail", error };
    const delayMs = retryAfterMs(headers);
    return delayMs === undefined ? { action: "retry", kind, error } : { action: "retry", kind, error, delayMs };
  }

  private parseGenerate(bodyText: string, server: string, attempts: number, topLogprobs: boolean): Verdict {
    const protocolError = (why: string, cause?: unknown) =>
      new EngineServerError(
        `${server}/generate sent a response that breaks the protocol: ${why}`,
        200,
        excerpt(bodyText),
        "bad_response",
        server,
        attempts,
        { cause },
      );
    const fail = (why: string, cause?: unknown): Verdict => ({ action: "fail", error: protocolError(why, cause) });
    let json: unknown;
    try {
      json = JSON.parse(bodyText);
    } catch (err) {
      // Malformed JSON is a garbled transfer, not a server that speaks another protocol: retry it like a cut body.
      // (JSON of the wrong shape, below, would come back the same every time, so it fails at once.)
      return { action: "retry", kind: "bad_response", error: protocolError("body is not JSON", err) };
    }
    const parsed = parseGenerateResponse(json);
    if (!parsed.success) {
      return fail(formatIssues(parsed.error, { only: "first" }), parsed.error);
    }
    try {
      this.pool.markHealthy(server);
      return { action: "done", result: toGenerateResult(parsed.data, { server, attempts, topLogprobs }) };
    } catch (err) {
      return fail((err as Error).message, err);
    }
  }

  private cancelled(server: string, rid: string | null, attempts: number): GenerateResult {
    this.counters.abortedByCaller++;
    // Dropping the connection already aborts the request in SGLang; the explicit call covers proxies and routers
    // that keep the upstream request alive.
    if (rid !== null) this.abortOnServer(server, rid);
    return {
      outputIds: [],
      logprobs: [],
      finishReason: { type: "abort", message: "aborted by the caller" },
      abortedByCaller: true,
      preempted: false,
      promptTokens: 0,
      completionTokens: 0,
      cachedTokens: 0,
      weightVersion: null,
      e2eLatency: null,
      rid: rid ?? "",
      server,
      attempts,
    };
  }

  /**
   * Fire-and-forget POST /abort_request for one rid; close() waits for these. Behind a router (a generate URL
   * that is not a worker) we cannot know which worker holds the rid, and the router does not route aborts, so
   * every worker gets it; SGLang ignores rids it does not hold.
   */
  private abortOnServer(server: string, rid: string): void {
    const targets = this.workers.includes(server) ? [server] : this.workers;
    for (const target of targets) {
      const call = sendAttempt({
        dispatcher: this.adminDispatcher,
        url: `${target}/abort_request`,
        method: "POST",
        headers: this.headers(true),
        body: JSON.stringify({ rid, abort_all: false }),
        timeoutMs: ABORT_CALL_TIMEOUT_MS,
      }).then(() => undefined);
      this.pendingAborts.add(call);
      void call.finally(() => this.pendingAborts.delete(call));
    }
  }

  /** Drops a finished trajectory's server pin. */
  forgetStickyKey(stickyKey: string): void {
    this.pool.forget(stickyKey);
  }

  /**
   * Seconds, since the client started, during which at least one /generate attempt of this client was outstanding at
   * a server (busy-time.ts): read it before and after a window for the engine's busy share of that window.
   */
  busySeconds(): number {
    return this.busy.seconds();
  }

  stats(): EngineStats {
    return {
      requests: this.counters.requests,
      retries: this.counters.retries,
      successes: this.counters.successes,
      abortedByCaller: this.counters.abortedByCaller,
      failures: { ...this.counters.failures },
      attemptErrors: { ...this.counters.attemptErrors },
      inFlight: this.pool.inFlightByServer(),
      concurrency: this.limit.stats(),
    };
  }

  // ---- single-server reads -------------------------------------------------------------------------------

  /** GET /health on every generate server; 200 is healthy. Also updates the pool's view. */
  async health(): Promise<ServerHealth[]> {
    return Promise.all(
      this.options.servers.map(async (server) => {
        try {
          const { status } = await callRaw(this.callContext, server, "GET", "/health", undefined, HEALTH_TIMEOUT_MS);
          const healthy = status === 200;
          if (healthy) this.pool.markHealthy(server);
          return { server, healthy, status };
        } catch {
          this.pool.markUnhealthy(server);
          return { server, healthy: false, status: null };
        }
      }),
    );
  }

  /** GET /model_info, falling back to the deprecated /get_model_info on a 404 (older servers). */
  async modelInfo(server: string = this.options.servers[0]!): Promise<ModelInfo> {
    const base = trimSlash(server);
    try {
      return toModelInfo(await callJson(this.callContext, base, "GET", "/model_info", undefined, modelInfoSchema, HEALTH_TIMEOUT_MS));
    } catch (err) {
      if (!(err instanceof EngineServerError) || err.status !== 404) throw err;
      return toModelInfo(await callJson(this.callContext, base, "GET", "/get_model_info", undefined, modelInfoSchema, HEALTH_TIMEOUT_MS));
    }
  }

  /** GET /server_info: every server arg plus scheduler state, as sent. */
  async serverInfo(server: string = this.options.servers[0]!): Promise<Record<string, unknown>> {
    return callJson(this.callContext, trimSlash(server), "GET", "/server_info", undefined, serverInfoSchema, HEALTH_TIMEOUT_MS);
  }

  // ---- admin calls, fanned out to every worker ----------------------------------------------------------

  private fanOut<T>(run: (server: string) => Promise<T>): Promise<AdminResult<T>[]> {
    return Promise.all(
      this.workers.map(async (server): Promise<AdminResult<T>> => {
        try {
          return { server, ok: true, value: await run(server) };
        } catch (err) {
          return { server, ok: false, error: err instanceof Error ? err : new Error(String(err)) };
        }
      }),
    );
  }

  /** POST /flush_cache on every worker; fails (400) on a worker with requests running. */
  flushCache(): Promise<AdminResult<string>[]> {
    return this.fanOut((server) => callText(this.callContext, server, "POST", "/flush_cache", undefined));
  }

  /**
   * POST /update_weights_from_disk on every worker. A 400 with the documented body is a result with
   * `success: false`, not an error. SGLang waits for in-flight requests unless generation is paused.
   */
  updateWeightsFromDisk(args: {
    modelPath: string;
    weightVersion?: string;
    abortAllRequests?: boolean;
    flushCache?: boolean;
    loadFormat?: string;
  }): Promise<AdminResult<UpdateWeightsResult>[]> {
    const body: Record<string, unknown> = { model_path: args.modelPath };
    if (args.weightVersion !== undefined) body.weight_version = args.weightVersion;
    if (args.abortAllRequests !== undefined) body.abort_all_requests = args.abortAllRequests;
    if (args.flushCache !== undefined) body.flush_cache = args.flushCache;
    if (args.loadFormat !== undefined) body.load_format = args.loadFormat;
    return this.fanOut((server) => this.weightCall(server, "/update_weights_from_disk", body));
  }

  /** Every worker URL: where admin calls go (the router does not route them). */
  get workerUrls(): readonly string[] {
    return this.workers;
  }

  /**
   * Whether each worker serves the POST-only `path`, asked without side effects: a GET answers 405 where the route
   * exists and 404 where it does not (FastAPI's behaviour, and the embedded engine's).
   */
  hasPostEndpoint(path: string): Promise<AdminResult<boolean>[]> {
    return this.fanOut(async (server) => {
      const { status } = await callRaw(this.callContext, server, "GET", path, undefined, HEALTH_TIMEOUT_MS);
      if (status === 405 || status === 404) return status === 405;
      throw new EngineServerError(`${server}${path} answered GET with HTTP ${status}, neither 405 nor 404`, status, "", "bad_response", server, 1);
    });
  }

  /**
   * POST /init_weights_update_group on every worker, each with its own rank_offset (1 + the ranks of the workers
   * before it). It answers once the whole group has formed, so the trainer must join at the same time.
   */
  initWeightsUpdateGroup(args: {
    masterAddress: string;
    masterPort: number;
    worldSize: number;
    groupName: string;
    backend: "nccl" | "gloo";
    rankOffset: (server: string) => number;
  }): Promise<AdminResult<UpdateWeightsResult>[]> {
    return this.fanOut((server) =>
      this.weightCall(server, "/init_weights_update_group", {
        master_address: args.masterAddress,
        master_port: args.masterPort,
        rank_offset: args.rankOffset(server),
        world_size: args.worldSize,
        group_name: args.groupName,
        backend: args.backend,
      }),
    );
  }

  /** POST /update_weights_from_distributed on every worker: it receives the bucket the trainer broadcasts meanwhile. */
  updateWeightsFromDistributed(args: {
    names: string[];
    dtypes: string[];
    shapes: number[][];
    groupName: string;
    flushCache: boolean;
    weightVersion?: string;
    loadFormat?: string;
  }): Promise<AdminResult<UpdateWeightsResult>[]> {
    const body: Record<string, unknown> = {
      names: args.names,
      dtypes: args.dtypes,
      shapes: args.shapes,
      group_name: args.groupName,
      flush_cache: args.flushCache,
    };
    if (args.weightVersion !== undefined) body.weight_version = args.weightVersion;
    if (args.loadFormat !== undefined) body.load_format = args.loadFormat;
    return this.fanOut((server) => this.weightCall(server, "/update_weights_from_distributed", body));
  }

  /**
   * POST /update_weights_from_tensor on every worker; `serialized(server)` gives its `serialized_named_tensors`
   * (one base64 entry per tensor-parallel rank).
   */
  updateWeightsFromTensor(args: {
    serialized: (server: string) => string[];
    flushCache: boolean;
    weightVersion?: string;
    loadFormat?: string;
  }): Promise<AdminResult<UpdateWeightsResult>[]> {
    return this.fanOut((server) => {
      const body: Record<string, unknown> = { serialized_named_tensors: args.serialized(server), flush_cache: args.flushCache };
      if (args.weightVersion !== undefined) body.weight_version = args.weightVersion;
      if (args.loadFormat !== undefined) body.load_format = args.loadFormat;
      return this.weightCall(server, "/update_weights_from_tensor", body);
    });
  }

  /** POST /get_weights_by_name: the parameter's first `truncateSize` rows as nested lists (SGLang's answer). */
  async getWeightsByName(server: string, name: string, truncateSize = 100): Promise<unknown[]> {
    return callJson(this.callContext, trimSlash(server), "POST", "/get_weights_by_name", { name, truncate_size: truncateSize }, z.array(z.unknown()));
  }

  /** A weight call's `{success, message}`; a 400 carries the same body with success false, a result, not an error. */
  private async weightCall(server: string, path: string, body: unknown): Promise<UpdateWeightsResult> {
    const accept = (status: number) => status === 200 || status === 400;
    return toUpdateWeightsResult(await callJson(this.callContext, server, "POST", path, body, updateWeightsSchema, this.options.adminTimeoutMs, accept));
  }

  /**
   * POST /load_lora_adapter `{lora_name, lora_path}` on every worker (SGLang started with --enable-lora). A 400 is a
   * result with success false and the server's error_message.
   */
  loadLoraAdapter(name: string, adapterPath: string): Promise<AdminResult<UpdateWeightsResult>[]> {
    return this.fanOut((server) => this.loraCall(server, "/load_lora_adapter", { lora_name: name, lora_path: adapterPath }));
  }

  /**
   * POST /update_weight_version `{new_version, abort_all_requests: false}` on every worker: the version every answer
   * reports from now on (after an adapter load, which carries no version of its own).
   */
  updateWeightVersion(version: string): Promise<AdminResult<UpdateWeightsResult>[]> {
    return this.fanOut((server) => this.weightCall(server, "/update_weight_version", { new_version: version, abort_all_requests: false }));
  }

  /** POST /unload_lora_adapter `{lora_name}` on every worker. */
  unloadLoraAdapter(name: string): Promise<AdminResult<UpdateWeightsResult>[]> {
    return this.fanOut((server) => this.loraCall(server, "/unload_lora_adapter", { lora_name: name }));
  }

  private async loraCall(server: string, path: string, body: unknown): Promise<UpdateWeightsResult> {
    const accept = (status: number) => status === 200 || status === 400;
    const answer = await callJson(this.callContext, server, "POST", path, body, loraAdapterSchema, this.options.adminTimeoutMs, accept);
    return { success: answer.success, message: answer.error_message ?? "", numPausedRequests: 0 };
  }

  /** POST /abort_request on every worker. Abort batch items by their exact `{rid}_{i}` ids, or use abortAll. */
  abortRequest(args: { rid?: string; abortAll?: boolean }): Promise<AdminResult<null>[]> {
    const body = { rid: args.rid ?? "", abort_all: args.abortAll ?? false };
    return this.fanOut(async (server) => {
      await callText(this.callContext, server, "POST", "/abort_request", body);
      return null;
    });
  }

  /** Needs --enable-memory-saver and an idle server. No tags means all (weights, kv_cache, cuda_graph). */
  releaseMemoryOccupation(args: { tags?: string[] } = {}): Promise<AdminResult<null>[]> {
    return this.fanOut(async (server) => {
      await callText(this.callContext, server, "POST", "/release_memory_occupation", args.tags ? { tags: args.tags } : {});
      return null;
    });
  }

  resumeMemoryOccupation(args: { tags?: string[] } = {}): Promise<AdminResult<null>[]> {
    return this.fanOut(async (server) => {
      await callText(this.callContext, server, "POST", "/resume_memory_occupation", args.tags ? { tags: args.tags } : {});
      return null;
    });
  }

  /**
   * `abort` aborts in-flight requests; `retract` re-queues them; `in_place` holds them. An abort answered while the
   * pause lasts, or to a request sent before it, comes back `preempted` (a partial rollout continues it).
   */
  async pauseGeneration(args: { mode?: "abort" | "retract" | "in_place" } = {}): Promise<AdminResult<string>[]> {
    // Opened before the call: SGLang aborts the moment it gets it, possibly before this await returns.
    if (this.pauseEdges % 2 === 0) this.pauseEdges += 1;
    return this.fanOut((server) => callText(this.callContext, server, "POST", "/pause_generation", { mode: args.mode ?? "abort" }));
  }

  async continueGeneration(args: { torchEmptyCache?: boolean } = {}): Promise<AdminResult<string>[]> {
    // SGLang requires a body here; `{}` keeps its defaults.
    const body = args.torchEmptyCache === undefined ? {} : { torch_empty_cache: args.torchEmptyCache };
    try {
      return await this.fanOut((server) => callText(this.callContext, server, "POST", "/continue_generation", body));
    } finally {
      // Closed only once every server answered: an abort still on its way back belongs to the pause.
      if (this.pauseEdges % 2 === 1) this.pauseEdges += 1;
    }
  }

  /** A pause is open now, or opened or closed since `edges` was read. */
  private pausedSince(edges: number): boolean {
    return this.pauseEdges % 2 === 1 || this.pauseEdges !== edges;
  }

  /**
   * Waits for best-effort abort calls, then closes the connection pool if the client made it. It waits for
   * requests still in flight: abort them first through their signals, or call destroy().
   */
  async close(): Promise<void> {
    await Promise.allSettled([...this.pendingAborts]);
    if (this.ownsDispatcher) await Promise.all([this.dispatcher.close(), this.adminDispatcher.close()]);
  }

  /** Drops every connection at once; requests still in flight fail. For shutdown paths that cannot wait. */
  async destroy(): Promise<void> {
    if (this.ownsDispatcher) await Promise.all([this.dispatcher.destroy(), this.adminDispatcher.destroy()]);
  }
}
