/**
 * SGLang's wire format: zod schemas for what the server sends back, and the translation from our camelCase
 * request to its snake_case body. Schemas are loose (unknown keys pass) because SGLang adds meta_info keys
 * between versions (spec_*, dp_rank, metric timestamps); only the keys we read are checked.
 */
import { z } from "zod";
import type { FinishReason, GenerateRequest, GenerateResult, ModelInfo, SamplingParams, TopLogprob, UpdateWeightsResult } from "./types.js";

const finishReasonSchema = z.union([
  z.looseObject({ type: z.literal("stop"), matched: z.union([z.number().int(), z.string(), z.null()]).optional() }),
  z.looseObject({ type: z.literal("length"), length: z.number().int() }),
  z.looseObject({
    type: z.literal("abort"),
    message: z.string().nullish(),
    status_code: z.number().int().nullish(),
    err_type: z.string().nullish(),
  }),
]);

type LogprobEntry = [number, number, string | null, ...unknown[]];

// Token lists run to thousands of entries; a plain loop inside z.custom checks them about 3x faster than
// z.array(z.tuple(...)), which matters at thousands of requests per second.
const tokenIdsSchema = z.custom<number[]>(
  (value) => Array.isArray(value) && value.every((id) => Number.isInteger(id)),
  { message: "expected a list of integer token ids" },
);

/** `[logprob, token_id, text|null]`; logprob is null only for the first input token, never for outputs. */
const outputLogprobsSchema = z.custom<LogprobEntry[]>(
  (value) =>
    Array.isArray(value) &&
    value.every(
      (entry) =>
        Array.isArray(entry) &&
        entry.length >= 3 &&
        typeof entry[0] === "number" &&
        Number.isInteger(entry[1]) &&
        (entry[2] === null || typeof entry[2] === "string"),
    ),
  { message: "expected a list of [logprob, token_id, text|null]" },
);

export const generateResponseSchema = z.looseObject({
  output_ids: tokenIdsSchema,
  meta_info: z.looseObject({
    id: z.string(),
    finish_reason: finishReasonSchema,
    prompt_tokens: z.number().int(),
    completion_tokens: z.number().int(),
    cached_tokens: z.number().int().optional(),
    weight_version: z.string().nullish(),
    e2e_latency: z.number().nullish(),
    output_token_logprobs: outputLogprobsSchema,
  }),
});

export type GenerateResponse = z.infer<typeof generateResponseSchema>;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const isNullishString = (value: unknown) => value === undefined || value === null || typeof value === "string";

/**
 * The usual /generate answer, checked by hand: a stop or length finish, integer ids, well-formed logprob entries.
 * Returns the response itself when every field the schema reads is of the usual kind, undefined for anything
 * else (an abort, a missing or odd field), which then goes to the zod schema. Accepts nothing the schema refuses
 * and changes nothing (test/engine-wire-fast-path.test.ts compares the two); it exists because zod's copy of every
 * response was a visible share of the client's CPU at thousands of turns per second.
 */
export function usualGenerateResponse(json: unknown): GenerateResponse | undefined {
  if (!isObject(json) || !isObject(json.meta_info)) return undefined;
  const ids = json.output_ids;
  if (!Array.isArray(ids)) return undefined;
  for (let i = 0; i < ids.length; i++) if (!Number.isInteger(ids[i])) return undefined;
  const meta = json.meta_info;
  if (typeof meta.id !== "string") return undefined;
  if (!Number.isSafeInteger(meta.prompt_tokens) || !Number.isSafeInteger(meta.completion_tokens)) return undefined;
  if (meta.cached_tokens !== undefined && !Number.isSafeInteger(meta.cached_tokens)) return undefined;
  if (!isNullishString(meta.weight_version)) return undefined;
  if (meta.e2e_latency !== undefined && meta.e2e_latency !== null && !Number.isFinite(meta.e2e_latency)) return undefined;
  const finish = meta.finish_reason;
  if (!isObject(finish)) return undefined;
  if (finish.type === "stop") {
    const matched = finish.matched;
    if (matched !== undefined && matched !== null && typeof matched !== "string" && !Number.isSafeInteger(matched)) return undefined;
  } else if (finish.type !== "length" || !Number.isSafeInteger(finish.length)) {
    return undefined;
  }
  const entries = meta.output_token_logprobs;
  if (!Array.isArray(entries)) return undefined;
  for (let i = 0; i < entries.length; i++) {
    const entry: unknown = entries[i];
    if (!Array.isArray(entry) || entry.length < 3 || typeof entry[0] !== "number" || !Number.isInteger(entry[1])) return undefined;
    if (entry[2] !== null && typeof entry[2] !== "string") return undefined;
  }
  return json as GenerateResponse;
}

/** A /generate response, validated: the usual shape by hand, anything else by the schema (with its error). */
export function parseGenerateResponse(json: unknown): ReturnType<typeof generateResponseSchema.safeParse> {
  const usual = usualGenerateResponse(json);
  return usual ? { success: true, data: usual } : generateResponseSchema.safeParse(json);
}

/** SGLang's error bodies: `{"error":{"message"}}`, FastAPI's `{"detail"}`, the OpenAI-style top level, or `{"error":"Unauthorized"}`. */
const errorBodySchema = z.looseObject({
  error: z.union([z.string(), z.looseObject({ message: z.string() })]).optional(),
  detail: z.unknown().optional(),
  message: z.string().optional(),
});

/** The server's own error message, or the start of the body when it is not one of the known shapes. */
export function errorMessageOf(bodyText: string): string {
  try {
    const parsed = errorBodySchema.safeParse(JSON.parse(bodyText));
    if (parsed.success) {
      const { error, detail, message } = parsed.data;
      if (typeof error === "string") return error;
      if (error !== undefined) return error.message;
      if (typeof detail === "string") return detail;
      if (detail !== undefined) return JSON.stringify(detail);
      if (message !== undefined) return message;
    }
  } catch {
    // not JSON: fall through to the raw excerpt
  }
  return excerpt(bodyText);
}

export function excerpt(text: string, max = 300): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

export const modelInfoSchema = z.looseObject({
  model_path: z.string(),
  tokenizer_path: z.string().nullish(),
  is_generation: z.boolean().optional(),
  weight_version: z.string().nullish(),
  model_type: z.string().nullish(),
  architectures: z.array(z.string()).nullish(),
});

export const updateWeightsSchema = z.looseObject({
  success: z.boolean(),
  message: z.string(),
  num_paused_requests: z.number().int().optional(),
});

export const serverInfoSchema = z.record(z.string(), z.unknown());

export function toWireSamplingParams(params: SamplingParams): Record<string, unknown> {
  const wire: Record<string, unknown> = { ...params.extra, max_new_tokens: params.maxNewTokens };
  const mapping: Array<[keyof SamplingParams, string]> = [
    ["temperature", "temperature"],
    ["topP", "top_p"],
    ["topK", "top_k"],
    ["minP", "min_p"],
    ["stopTokenIds", "stop_token_ids"],
    ["stop", "stop"],
    ["ignoreEos", "ignore_eos"],
    ["minNewTokens", "min_new_tokens"],
    ["frequencyPenalty", "frequency_penalty"],
    ["presencePenalty", "presence_penalty"],
    ["repetitionPenalty", "repetition_penalty"],
    ["samplingSeed", "sampling_seed"],
    ["jsonSchema", "json_schema"],
  ];
  for (const [ours, theirs] of mapping) {
    if (params[ours] !== undefined) wire[theirs] = params[ours];
  }
  // Tool-call markers must survive detokenization for client-side parsing (sglang.md §2, "Parsing behaviour").
  wire.skip_special_tokens = false;
  return wire;
}

/**
 * The JSON body of one /generate attempt: the request's ids, sampling parameters, priority and top-logprobs count, with
 * the attempt's `rid` and the client's LoRA adapter (`lora_path`), which are the client's and not the request's.
 */
export function generateBody(req: BodyFields, attempt: AttemptFields): string {
  // The ids are put into the text by hand: JSON.stringify prints a typed array as an object of its indices.
  return `${IDS_OPEN}${req.inputIds.join(",")}${afterIds(req, attempt)}`;
}

/**
 * generateBody as the bytes sent, put together from the ids' text the caller keeps (`inputIdsText`) where it has it:
 * the same JSON, without printing the ids again or encoding them into UTF-8.
 */
export function generateBodyBytes(req: BodyFields, attempt: AttemptFields): Buffer {
  if (req.inputIdsText === undefined) return Buffer.from(generateBody(req, attempt));
  const ids = req.inputIdsText;
  const rest = afterIds(req, attempt);
  const restBytes = Buffer.byteLength(rest);
  const body = Buffer.allocUnsafe(IDS_OPEN.length + ids.length + restBytes);
  body.write(IDS_OPEN, 0, "latin1");
  body.set(ids, IDS_OPEN.length);
  body.write(rest, IDS_OPEN.length + ids.length, restBytes, "utf8");
  return body;
}

type BodyFields = Pick<GenerateRequest, "inputIds" | "inputIdsText" | "samplingParams" | "priority" | "topLogprobs">;
type AttemptFields = { rid: string; loraPath?: string | null };

const IDS_OPEN = '{"input_ids":[';

/** The body after the ids' list items: `],` and every other field, to the closing brace. */
function afterIds(req: BodyFields, attempt: AttemptFields): string {
  const rest = JSON.stringify({
    sampling_params: toWireSamplingParams(req.samplingParams),
    rid: attempt.rid,
    return_logprob: true,
    ...(req.priority === undefined ? {} : { priority: req.priority }),
    ...(attempt.loraPath ? { lora_path: attempt.loraPath } : {}),
    ...(req.topLogprobs ? { top_logprobs_num: req.topLogprobs } : {}),
  });
  return `],${rest.slice(1)}`;
}

/**
 * `meta_info.output_top_logprobs` for `count` output tokens: per position a list of `[logprob, token_id, text|null]`,
 * most likely first (SGLang sorts them); checked here, only for a request that asked for them, so the usual answer's
 * fast path never walks them. Throws on a list of the wrong length or shape: a reply built from misaligned
 * alternatives would name the wrong tokens.
 */
export function topLogprobsOf(value: unknown, count: number): TopLogprob[][] {
  if (!Array.isArray(value) || value.length !== count) {
    throw new Error(`output_top_logprobs has ${Array.isArray(value) ? value.length : "no"} entries for ${count} output tokens`);
  }
  return value.map((position: unknown, i) => {
    // SGLang writes null where it computed none.
    if (position === null) return [];
    if (!Array.isArray(position)) throw new Error(`output_top_logprobs[${i}] is not a list`);
    return position.map((entry: unknown, j) => {
      if (!Array.isArray(entry) || typeof entry[0] !== "number" || !Number.isInteger(entry[1])) {
        throw new Error(`output_top_logprobs[${i}][${j}] is not [logprob, token_id, text]`);
      }
      return { logprob: entry[0] as number, id: entry[1] as number };
    });
  });
}

/** SGLang's /load_lora_adapter and /unload_lora_adapter answer (LoadLoRAAdapterReqOutput). */
export const loraAdapterSchema = z.looseObject({
  success: z.boolean(),
  error_message: z.string().nullable().optional(),
  loaded_adapters: z.record(z.string(), z.unknown()).nullable().optional(),
});

function toFinishReason(wire: GenerateResponse["meta_info"]["finish_reason"]): FinishReason {
  switch (wire.type) {
    case "stop":
      return wire.matched === undefined ? { type: "stop" } : { type: "stop", matched: wire.matched };
    case "length":
      return { type: "length", length: wire.length };
    case "abort": {
      const reason: FinishReason = { type: "abort" };
      if (wire.message != null) reason.message = wire.message;
      if (wire.status_code !== undefined) reason.statusCode = wire.status_code;
      if (wire.err_type !== undefined) reason.errType = wire.err_type;
      return reason;
    }
  }
}

/**
 * Turns a validated response into our result. Throws when the token and logprob lists disagree: a trainer
 * fed misaligned behaviour logprobs learns from the wrong tokens without any error.
 */
export function toGenerateResult(
  wire: GenerateResponse,
  context: { server: string; attempts: number; topLogprobs?: boolean },
): GenerateResult {
  const meta = wire.meta_info;
  const logprobs = meta.output_token_logprobs.map((entry) => entry[0]);
  if (logprobs.length !== wire.output_ids.length) {
    throw new Error(
      `output_token_logprobs has ${logprobs.length} entries but output_ids has ${wire.output_ids.length}`,
    );
  }
  meta.output_token_logprobs.forEach((entry, i) => {
    if (entry[1] !== wire.output_ids[i]) {
      throw new Error(`output_token_logprobs[${i}] is for token ${entry[1]} but output_ids[${i}] is ${wire.output_ids[i]}`);
    }
  });
  return {
    outputIds: wire.output_ids,
    logprobs,
    ...(context.topLogprobs ? { topLogprobs: topLogprobsOf(meta.output_top_logprobs, wire.output_ids.length) } : {}),
    finishReason: toFinishReason(meta.finish_reason),
    abortedByCaller: false,
    preempted: false,
    promptTokens: meta.prompt_tokens,
    completionTokens: meta.completion_tokens,
    cachedTokens: meta.cached_tokens ?? 0,
    weightVersion: meta.weight_version ?? null,
    e2eLatency: meta.e2e_latency ?? null,
    rid: meta.id,
    server: context.server,
    attempts: context.attempts,
  };
}

export function toModelInfo(wire: z.infer<typeof modelInfoSchema>): ModelInfo {
  return {
    modelPath: wire.model_path,
    tokenizerPath: wire.tokenizer_path ?? null,
    isGeneration: wire.is_generation ?? true,
    weightVersion: wire.weight_version ?? null,
    modelType: wire.model_type ?? null,
    architectures: wire.architectures ?? null,
    raw: wire,
  };
}

export function toUpdateWeightsResult(wire: z.infer<typeof updateWeightsSchema>): UpdateWeightsResult {
  return { success: wire.success, message: wire.message, numPausedRequests: wire.num_paused_requests ?? 0 };
}
