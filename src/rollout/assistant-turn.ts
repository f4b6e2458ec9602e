/**
 * One assistant turn: send the conversation's own token record to /generate, append the sampled ids untouched
 * (mask 1), then parse the tool calls out of those ids. A server that stays down, an abort, the deadline and a
 * length cut come back as a Finish, never as an exception.
 */
import type { GenerateRequest, GenerateResult } from "../engine/index.js";
import { isEngineError } from "../engine/index.js";
import type { ParseResult } from "../parsers/index.js";
import type { Sample } from "./sample.js";
import { OVER_SAMPLE_FINISH_REASON, OverSampleAbort } from "./over-sample.js";
import { errorText, type Finish, type TrajectoryInFlight } from "./trajectory-state.js";

/**
 * Samples the next assistant turn and appends it; a Finish when the trajectory ends with this turn. `cap` (an agent
 * loop's own limit on this turn) below the response budget left makes a length stop the loop's business: the turn
 * is cut, and the trajectory goes on.
 */
export async function sampleAssistantTurn(run: TrajectoryInFlight, cap?: number): Promise<Finish | undefined> {
  const remaining = run.ctx.maxResponseLength - run.conversation.responseLength;
  if (remaining <= 0) return { status: "truncated", reason: "response_budget" };
  const limit = cap === undefined ? remaining : Math.min(cap, remaining);
  const generated = await generate(run, limit);
  if (generated.finish) return generated.finish;
  return appendSampled(run, generated.result, limit < remaining);
}

/**
 * Parses the last assistant turn's calls (when tools are configured) and records them on its message. Undefined
 * when the turn attempted no call: it holds neither a call nor a parse error.
 */
export function parseToolCalls(run: TrajectoryInFlight): ParseResult | undefined {
  const { ctx, conversation } = run;
  if (!ctx.tools) return undefined;
  const parsed = ctx.parser.parseTokens(conversation.lastAssistantIds(), ctx.model, { tools: ctx.tools.names() });
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

async function generate(run: TrajectoryInFlight, maxNewTokens: number): Promise<Generated> {
  const { log } = run;
  const started = performance.now();
  try {
    const result = await run.ctx.client.generate(generateRequest(run, maxNewTokens));
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

function generateRequest(run: TrajectoryInFlight, maxNewTokens: number): GenerateRequest {
  const { model, rollout, greedy } = run.ctx;
  const seed = requestSeed(rollout.seed, run.sample, run.conversation.assistantTurns);
  return {
    inputIds: [...run.conversation.tokenIds],
    samplingParams: {
      maxNewTokens,
      temperature: greedy ? 0 : rollout.temperature,
      topP: greedy ? 1 : rollout.top_p,
      topK: greedy ? -1 : rollout.top_k,
      stopTokenIds: [...new Set([...model.eosTokenIds, model.endOfTurnTokenId])],
      ...(seed === undefined ? {} : { samplingSeed: seed }),
    },
    stickyKey: run.id,
    signal: run.deadline,
  };
}

/** A deterministic per-request seed from the run seed and the request's place, so reruns sample the same. */
function requestSeed(seed: number | null, sample: Sample, turn: number): number | undefined {
  if (seed === null) return undefined;
  let h = (seed ^ 0x9e3779b9) >>> 0;
  for (const v of [sample.dataIndex, sample.sampleIndex, turn]) {
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
  run.conversation.appendSampled(result.outputIds, result.logprobs);
  run.log.assistantFinish.push(result.finishReason.type);
  // Cut mid-turn: whatever call it was writing is incomplete, so it is never parsed or executed.
  if (result.finishReason.type === "length" && !cappedByLoop) return { status: "truncated", reason: "length" };
  if (result.finishReason.type === "abort") {
    return { status: "aborted", reason: "abort", error: result.finishReason.message ?? "aborted by the server" };
  }
  return undefined;
}
