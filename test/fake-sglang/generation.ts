/**
 * What the fake "model" samples: a scripted or computed token sequence, cut the way SGLang's scheduler cuts it
 * (first stop / EOS token kept as the last output id, or max_new_tokens), with deterministic fake logprobs.
 */

/** sampling_params as they arrive on the wire (snake_case). */
export interface WireSamplingParams {
  max_new_tokens?: number | null;
  min_new_tokens?: number | null;
  stop_token_ids?: number[] | null;
  ignore_eos?: boolean | null;
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  n?: number | null;
  [key: string]: unknown;
}

export interface RespondContext {
  /** 0-based index of this sample among every /generate sample this server has produced since it started. */
  callIndex: number;
  /** The rid SGLang would report for this item. */
  rid: string;
  /** j in 0..n-1 for `n` parallel samples of one prompt. */
  sampleIndex: number;
}

/** Token ids the model "wants" to emit; the fake applies stop tokens and max_new_tokens afterwards. */
export type RespondResult = number[] | { outputIds: number[]; logprobs?: number[] };

export type RespondFn = (
  inputIds: number[],
  samplingParams: WireSamplingParams,
  ctx: RespondContext,
) => RespondResult | Promise<RespondResult>;

/**
 * One scripted reply. It matches when every given condition holds: the prompt ends with `suffix`, starts with
 * `prefix`, or this is sample number `callIndex`. The first matching entry wins.
 */
export interface ScriptEntry {
  suffix?: number[];
  prefix?: number[];
  callIndex?: number;
  output: number[];
  logprobs?: number[];
}

export function matchesScript(entry: ScriptEntry, inputIds: number[], callIndex: number): boolean {
  if (entry.callIndex !== undefined && entry.callIndex !== callIndex) return false;
  if (entry.suffix !== undefined) {
    if (entry.suffix.length > inputIds.length) return false;
    const offset = inputIds.length - entry.suffix.length;
    if (!entry.suffix.every((id, i) => inputIds[offset + i] === id)) return false;
  }
  if (entry.prefix !== undefined) {
    if (entry.prefix.length > inputIds.length) return false;
    if (!entry.prefix.every((id, i) => inputIds[i] === id)) return false;
  }
  return entry.suffix !== undefined || entry.prefix !== undefined || entry.callIndex !== undefined;
}

/** A logprob in (-5, 0) computed from the token and its position, so tests can predict it. */
export function fakeLogprob(tokenId: number, position: number): number {
  const h = (Math.imul(tokenId + 1, 2654435761) ^ Math.imul(position + 1, 40503)) >>> 0;
  return -((h % 5000) + 1) / 1000;
}

function hashIds(ids: number[]): number {
  let h = 2166136261;
  for (const id of ids) h = Math.imul(h ^ id, 16777619) >>> 0;
  return h;
}

/**
 * The unscripted model: `defaultLength` prompt-dependent tokens, then the first EOS id, then more tokens (which
 * only matter with ignore_eos). Greedy requests (temperature 0) give the same tokens for every sample.
 */
export function defaultOutput(
  inputIds: number[],
  params: WireSamplingParams,
  ctx: RespondContext,
  config: { eosTokenIds: number[]; defaultLength: number; vocabSize: number },
): number[] {
  const maxNew = params.max_new_tokens ?? 128;
  const greedy = (params.temperature ?? 1) < 1e-6;
  let state = hashIds(inputIds) ^ (greedy ? 0 : Math.imul(ctx.sampleIndex + 1, 374761393));
  const avoid = new Set(config.eosTokenIds);
  const out: number[] = [];
  const low = 100;
  const span = Math.max(1, Math.min(config.vocabSize, 100_000) - low);
  while (out.length < maxNew + 1) {
    if (out.length === config.defaultLength && config.eosTokenIds.length > 0) {
      out.push(config.eosTokenIds[0]!);
      continue;
    }
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    let id = low + (state % span);
    while (avoid.has(id)) id++;
    out.push(id);
  }
  return out;
}

export type WireFinishReason =
  | { type: "stop"; matched: number }
  | { type: "length"; length: number }
  | { type: "abort"; message: string; status_code: number | null; err_type: string | null };

export interface Sampled {
  outputIds: number[];
  logprobs: number[];
  finishReason: WireFinishReason;
}

/**
 * Cuts the wanted tokens the way SGLang does: stop at the first stop_token_ids / EOS id (EOS unless ignore_eos),
 * once min_new_tokens are out, keeping that token; otherwise stop at max_new_tokens with `length`. A script that
 * runs out before either also reports `length` (with the count emitted): the fake has nothing more to say.
 */
export function cutOutput(
  wanted: number[],
  wantedLogprobs: number[] | undefined,
  params: WireSamplingParams,
  eosTokenIds: number[],
): Sampled {
  const maxNew = params.max_new_tokens ?? 128;
  const minNew = params.min_new_tokens ?? 0;
  const stopIds = new Set(params.stop_token_ids ?? []);
  if (!params.ignore_eos) for (const id of eosTokenIds) stopIds.add(id);
  const outputIds: number[] = [];
  let finishReason: WireFinishReason | undefined;
  for (const id of wanted) {
    if (outputIds.length >= maxNew) break;
    outputIds.push(id);
    if (stopIds.has(id) && outputIds.length >= minNew) {
      finishReason = { type: "stop", matched: id };
      break;
    }
  }
  finishReason ??= { type: "length", length: outputIds.length };
  const logprobs = outputIds.map((id, i) => wantedLogprobs?.[i] ?? fakeLogprob(id, i));
  return { outputIds, logprobs, finishReason };
}
