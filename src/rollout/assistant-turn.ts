/**
 * One assistant turn: send the conversation's own token record to /generate, append the sampled ids untouched
 * (mask 1), then parse the tool calls out of those ids. A server that stays down, an abort, the deadline and a
 * length cut come back as a Finish, never as an exception. A generation that a weight update preempted (partial
 * rollouts) is continued on the new weights: its tokens so far stay, with their logprobs and the version that
 * sampled them, and the next request asks for the rest.
 */
import type { GenerateRequest, GenerateResult, TopLogprob } from "../engine/index.js";
import { isEngineError } from "../engine/index.js";
import type { ParseResult } from "../parsers/index.js";
import type { GenerateOptions } from "./agent-loop.js";
import type { Sample } from "./sample.js";
import { OVER_SAMPLE_FINISH_REASON, OverSampleAbort } from "./over-sample.js";
import { errorText, type Finish, type TrajectoryInFlight } from "./trajectory-state.js";

/**
 * Samples the next assistant turn and appends it; a Finish when the trajectory ends with this turn. `maxNewTokens` (an
 * agent loop's own limit on this turn) below the response budget left makes a length stop the loop's business: the
 * turn is cut, and the trajectory goes on. With options.topLogprobs, `topLogprobs` gets the engine's alternatives for
 * every token appended, one list per token (empty where the engine gave none).
 */
export async function sampleAssistantTurn(
  run: TrajectoryInFlight,
  options: GenerateOptions = {},
  topLogprobs?: TopLogprob[][],
): Promise<Finish | undefined> {
  const cap = options.maxNewTokens;
  const remaining = run.ctx.maxResponseLength - run.conversation.responseLength;
  if (remaining <= 0) return { status: "truncated", reason: "response_budget" };
  const limit = cap === undefined ? remaining : Math.min(cap, remaining);
  let sampled = 0;
  for (let piece = 0; ; piece++) {
    const generated = await generate(run, generateRequest(run, limit - sampled, piece, options));
    if (generated.finish) return generated.finish;
    const { result } = generated;
    if (topLogprobs) for (let i = 0; i < result.outputIds.length; i++) topLogprobs.push(result.topLogprobs?.[i] ?? []);
    if (!result.preempted) return appendSampled(run, result, limit < remaining);
    if (result.outputIds.length >= limit - sampled) {
      // Preempted with nothing left to ask for: the turn ran to its limit, as a length stop would have.
      return appendSampled(run, { ...result, finishReason: { type: "length", length: limit } }, limit < remaining);
    }
    appendPiece(run, result);
    sampled += result.outputIds.length;
  }
}

/**
 * Parses the last assistant turn's calls (when tools are configured) and records them on its message. Undefined
 * when the turn attempted no call: it holds neither a call nor a parse error.
 */
export function parseToolCalls(run: TrajectoryInFlight, toolNames: readonly string[] | undefined = run.ctx.tools?.names()): ParseResult | undefined {
  const { ctx, conversation } = run;
  if (!toolNames) return undefined;
  const parsed = ctx.parser.parseTokens(conversation.lastAssistantIds(), ctx.model, { tools: toolNames });
  run.log.parseErrors += parsed.errors.length;
  if (parsed.calls.length > 0) {
    const toolCalls = parsed.calls.map((call) => ({
      type: "function" as const,
      function: { name: call.name, arguments: call.arguments },
    }));
    conversation.recordToolCalls(toolCalls, parsed.normalText);
  }
  return parsed.calls.length > 0 || parsed.errors.length > 0 ? parsed : undefined;
}

type Generated = { result: GenerateResult; finish?: undefined } | { finish: Finish };

async function generate(run: TrajectoryInFlight, request: GenerateRequest): Promise<Generated> {
  const { log } = run;
  const started = performance.now();
  try {
    const result = await run.ctx.client.generate(request);
    log.genMs += performance.now() - started;
    log.retries += result.attempts - 1;
    log.server = result.server;
    log.weightVersion = result.weightVersion ?? log.weightVersion;
    return { result };
  } catch (err) {
    log.genMs += performance.now() - started;
    return { finish: generateFailure(run, err) };
  }
}

/**
 * `piece` > 0 continues a preempted generation; its seed differs, so it does not replay the first piece's draws, and
 * it goes without the turn's grammar, which would restart at the grammar's first token.
 */
function generateRequest(run: TrajectoryInFlight, maxNewTokens: number, piece: number, { stop, jsonSchema, topLogprobs }: GenerateOptions): GenerateRequest {
  const { model, rollout, greedy } = run.ctx;
  const seed = requestSeed(rollout.seed, run.sample, run.conversation.assistantTurns, piece);
  return {
    // The record itself, not a copy: nothing appends to it while its own request is out.
    inputIds: run.conversation.tokenIds,
    inputIdsText: run.conversation.tokenIdsText,
    samplingParams: {
      maxNewTokens,
      temperature: greedy ? 0 : rollout.temperature,
      topP: greedy ? 1 : rollout.top_p,
      topK: greedy ? -1 : rollout.top_k,
      stopTokenIds: [...new Set([...model.eosTokenIds, model.endOfTurnTokenId])],
      ...(stop && stop.length > 0 ? { stop: [...stop] } : {}),
      ...(seed === undefined ? {} : { samplingSeed: seed }),
      ...(jsonSchema !== undefined && piece === 0 ? { jsonSchema } : {}),
    },
    stickyKey: run.id,
    signal: run.deadline,
    ...(run.ctx.priority === undefined ? {} : { priority: run.ctx.priority }),
    ...(topLogprobs ? { topLogprobs } : {}),
  };
}

/** A deterministic per-request seed from the run seed and the request's place, so reruns sample the same. */
function requestSeed(seed: number | null, sample: Sample, turn: number, piece: number): number | undefined {
  if (seed === null) return undefined;
  let h = (seed ^ 0x9e3779b9) >>> 0;
  // The first piece keeps the seed it had before partial rollouts existed: reruns of old configs sample the same.
  for (const v of piece === 0 ? [sample.dataIndex, sample.sampleIndex, turn] : [sample.dataIndex, sample.sampleIndex, turn, piece]) {
    h = Math.imul(h ^ v, 0x85ebca6b) >>> 0;
    h = (h ^ (h >>> 13)) >>> 0;
  }
  return h % 2 ** 31;
}

/** The outcome of a request that threw: the deadline, or an engine error after every retry; anything else is a bug. */
function generateFailure(run: TrajectoryInFlight, err: unknown): Finish {
  // A request that failed for good still made its attempts: count them, as a successful one's are.
  if (isEngineError(err)) run.log.retries += Math.max(0, err.attempts - 1);
  if (run.deadline.aborted) return deadlineFinish(run.ctx.signal);
  if (isEngineError(err)) return { status: "failed", reason: "error", error: errorText(err) };
  throw err;
}

/**
 * The trajectory's deadline fired: its own trajectory_timeout, or the run-wide signal, which is over-sampling or
 * Ctrl-C (then the trajectory is not recorded at all).
 */
export function deadlineFinish(runSignal: AbortSignal): Finish {
  if (!runSignal.aborted) return { status: "aborted", reason: "deadline" };
  return { status: "aborted", reason: runSignal.reason instanceof OverSampleAbort ? OVER_SAMPLE_FINISH_REASON : "cancelled" };
}

function appendSampled(run: TrajectoryInFlight, result: GenerateResult, cappedByLoop: boolean): Finish | undefined {
  if (result.abortedByCaller) return deadlineFinish(run.ctx.signal);
  appendPiece(run, result);
  run.log.assistantFinish.push(result.finishReason.type);
  // Cut mid-turn: whatever call it was writing is incomplete, so it is never parsed or executed.
  if (result.finishReason.type === "length" && !cappedByLoop) return { status: "truncated", reason: "length" };
  if (result.finishReason.type === "abort") {
    return { status: "aborted", reason: "abort", error: result.finishReason.message ?? "aborted by the server" };
  }
  return undefined;
}

/** Appends a generation's tokens (a whole turn, or the part before a preemption) and the version that sampled them. */
function appendPiece(run: TrajectoryInFlight, result: GenerateResult): void {
  const start = run.conversation.responseLength;
  run.conversation.appendSampled(result.outputIds, result.logprobs);
  if (result.outputIds.length === 0) return;
  const spans = run.log.versionSpans;
  const last = spans[spans.length - 1];
  if (last && last.end === start && last.weight_version === result.weightVersion) last.end = run.conversation.responseLength;
  else spans.push({ start, end: run.conversation.responseLength, weight_version: result.weightVersion });
}
