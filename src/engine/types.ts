/**
 * The shapes the rest of agentrl sees from an SGLang server. They are camelCase views of SGLang's native
 * `/generate` protocol (../shared/reference/sglang.md §1): the client translates on the way in and out, so no
 * snake_case wire key leaks past src/engine.
 */

/** Per-request sampling knobs. `maxNewTokens` is required: SGLang's default of 128 silently truncates turns. */
export interface SamplingParams {
  maxNewTokens: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  minP?: number;
  stopTokenIds?: number[];
  stop?: string | string[];
  ignoreEos?: boolean;
  minNewTokens?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
  repetitionPenalty?: number;
  samplingSeed?: number;
  /**
   * A JSON schema (as JSON text) the output must match: SGLang's grammar-constrained decoding (`json_schema`). The
   * sampled tokens are still the record's; only the choice among them is masked by the grammar.
   */
  jsonSchema?: string;
  /** Passed through unchanged as extra `sampling_params` keys (snake_case, as SGLang spells them). */
  extra?: Record<string, unknown>;
}

export interface GenerateRequest {
  /**
   * Plain, or a conversation's typed record (chat/token-columns.ts) sent as it is. Read when each attempt is sent (a
   * retry's too): the caller leaves it unchanged until generate() returns.
   */
  inputIds: readonly number[] | Int32Array;
  /**
   * `inputIds` as JSON list items (`1,2,3`) in ASCII bytes, when the caller keeps them (a conversation does,
   * token-columns.ts): the request body is put together from them without printing the ids again.
   */
  inputIdsText?: Uint8Array;
  samplingParams: SamplingParams;
  /** Request id sent to SGLang; a fresh one is made when omitted and for every retry. */
  rid?: string;
  /** Keeps every request with this key on one server (a trajectory id), for prefix-cache reuse. */
  stickyKey?: string;
  /** Cancels the request (trajectory deadline, Ctrl-C). The client then best-effort POSTs /abort_request. */
  signal?: AbortSignal;
  /**
   * SGLang's request `priority`: with --enable-priority-scheduling the server takes waiting requests higher values
   * first; without, it ignores the field. Omitted when undefined.
   */
  priority?: number;
  /**
   * SGLang's `top_logprobs_num`: the engine also reports, at every sampled position, the `topLogprobs` most likely
   * tokens with their log-probs (GenerateResult.topLogprobs). Omitted when undefined or 0.
   */
  topLogprobs?: number;
}

/** One of the most likely tokens at a sampled position (`meta_info.output_top_logprobs`). */
export interface TopLogprob {
  id: number;
  logprob: number;
}

/** SGLang's finish_reason, one variant per case of schedule_batch.py. */
export type FinishReason =
  | { type: "stop"; matched?: number | string | null }
  | { type: "length"; length: number }
  | { type: "abort"; message?: string; statusCode?: number | null; errType?: string | null };

export interface GenerateResult {
  /** The sampled token ids, untrimmed: a matched EOS / stop token is the last element. */
  outputIds: number[];
  /** Behaviour logprob of each output id (`meta_info.output_token_logprobs[i][0]`). */
  logprobs: number[];
  /** With a request's topLogprobs: the most likely tokens at each output position, most likely first. */
  topLogprobs?: TopLogprob[][];
  finishReason: FinishReason;
  /** True when our caller's AbortSignal ended the request (then outputIds is empty: nothing was received). */
  abortedByCaller: boolean;
  /**
   * True for an `abort` that a weight-update pause caused (pauseGeneration … continueGeneration): the generation was
   * cut, not ended, and the caller continues it on the new weights (a partial rollout).
   */
  preempted: boolean;
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
  weightVersion: string | null;
  /** Server-side end-to-end latency in seconds (`meta_info.e2e_latency`), null when absent. */
  e2eLatency: number | null;
  /** The rid of the attempt that produced this result. */
  rid: string;
  /** Base URL of the server that answered. */
  server: string;
  /** 1 + the number of retries it took. */
  attempts: number;
}

/** Why a request failed for good; also the keys of `EngineStats.failures`. */
export type FailureKind =
  | "connect" // refused, DNS, connect timeout: nothing reached the server
  | "reset" // the connection dropped before any response byte arrived
  | "timeout" // no complete response within requestTimeoutMs
  | "partial_body" // the response started but did not complete (cut body); retried
  | "http_4xx"
  | "http_5xx"
  | "http_429"
  | "bad_response"; // a 2xx whose body does not match the protocol (malformed JSON is retried, a wrong shape is not)

export interface ModelInfo {
  modelPath: string;
  tokenizerPath: string | null;
  isGeneration: boolean;
  weightVersion: string | null;
  modelType: string | null;
  architectures: string[] | null;
  /** Everything the server sent, unknown keys included. */
  raw: Record<string, unknown>;
}

export interface UpdateWeightsResult {
  success: boolean;
  message: string;
  numPausedRequests: number;
}

/** One worker's answer to an admin call that fans out to every worker URL. */
export type AdminResult<T> = { server: string; ok: true; value: T } | { server: string; ok: false; error: Error };

export interface ServerHealth {
  server: string;
  healthy: boolean;
  /** HTTP status, or null when the server could not be reached. */
  status: number | null;
}

export interface EngineStats {
  /** Attempts sent on /generate, retries included. */
  requests: number;
  retries: number;
  successes: number;
  /** Requests ended by the caller's signal. */
  abortedByCaller: number;
  /** Final failures (after retries) by kind. */
  failures: Record<FailureKind, number>;
  /** Attempt-level errors by kind, retried or not. */
  attemptErrors: Record<FailureKind, number>;
  inFlight: Record<string, number>;
  /** The adaptive limit on attempts in flight: now, its lowest so far, how often it was cut, attempts waiting. */
  concurrency: { limit: number; lowest: number; decreases: number; waiting: number };
}
