/**
 * One trajectory, as one plain async function: generate, parse, call tools or the simulated user, append, repeat,
 * until the model stops, a limit is hit, or the deadline passes. Concurrency lives outside (see run-rollout.ts).
 *
 * Token-in/token-out: the request is always the conversation's own token record, and what the engine returns is
 * appended untouched (mask 1). Environment turns are template deltas (mask 0). Expected outcomes (length, abort,
 * deadline, a server that stays down, tool failures) end up as a status and a finish reason in the record, never as
 * an exception; only bugs and bad configuration throw.
 */
import { Conversation, type ChatMessage, type ChatModel, type ToolCall } from "../chat/index.js";
import type { SglangClient, GenerateResult } from "../engine/index.js";
import { isEngineError } from "../engine/index.js";
import type { FunctionCallParser, ParseResult } from "../parsers/index.js";
import type { ToolRegistry, ToolsKwargs } from "../tools/index.js";
import { runToolCall } from "../tools/index.js";
import type { InteractionRegistry } from "../interactions/index.js";
import { computeReward, type LoadedRewardFunction } from "../rewards/index.js";
import {
  TRAJECTORY_FORMAT_VERSION,
  trajectoryKey,
  type ToolCallRecord,
  type Trajectory,
  type TrajectorySegment,
  type TrajectoryStatus,
} from "../data/trajectory.js";
import type { RolloutSection } from "./config.js";
import type { Sample } from "./sample.js";
import { OVER_SAMPLE_FINISH_REASON, OverSampleAbort } from "./over-sample.js";

export interface TrajectoryContext {
  model: ChatModel;
  client: SglangClient;
  parser: FunctionCallParser;
  tools: ToolRegistry | undefined;
  /** Tool schemas given to the chat template (every tool of the YAML, as verl's agent loop does). */
  toolSchemas: Record<string, unknown>[];
  interactions: InteractionRegistry | undefined;
  rewardFunction: LoadedRewardFunction | undefined;
  /** custom_reward_function.reward_kwargs (absent: none). */
  rewardKwargs?: Record<string, unknown>;
  rollout: RolloutSection;
  maxPromptLength: number;
  maxResponseLength: number;
  /** Cancels every trajectory (Ctrl-C, over-sampling abort). */
  signal: AbortSignal;
  /** The training step, when the rollout is part of one. */
  step?: number | null;
  /** Greedy decoding for validation, whatever the config's temperature. */
  greedy?: boolean;
  warn?: (message: string) => void;
}

type Finish = { status: TrajectoryStatus; reason: string; error?: string };

/** The rendered prompt is longer than data.max_prompt_length; the rollout skips the prompt or fails. */
export class PromptTooLongError extends Error {
  constructor(
    readonly dataIndex: number,
    readonly length: number,
    readonly limit: number,
  ) {
    super(`row ${dataIndex}: the rendered prompt has ${length} tokens, over data.max_prompt_length=${limit}`);
  }
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

/** Why the run-wide signal stopped this trajectory: over-sampling, or Ctrl-C (then it is not recorded at all). */
function runAbortReason(signal: AbortSignal): string {
  return signal.reason instanceof OverSampleAbort ? OVER_SAMPLE_FINISH_REASON : "cancelled";
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export async function runTrajectory(sample: Sample, ctx: TrajectoryContext): Promise<Trajectory> {
  const startedAt = Date.now();
  const { model, rollout } = ctx;
  const multiTurn = rollout.multi_turn;
  const id = trajectoryKey(sample.dataIndex, sample.sampleIndex);
  const deadline = AbortSignal.any([ctx.signal, AbortSignal.timeout(rollout.trajectory_timeout * 1000)]);
  const conversation = Conversation.start(model, sample.messages, {
    tools: ctx.toolSchemas,
    driftMode: multiTurn.tokenization_sanity_check_mode === "disable" ? "off" : multiTurn.tokenization_sanity_check_mode,
  });
  if (conversation.promptLength > ctx.maxPromptLength) {
    throw new PromptTooLongError(sample.dataIndex, conversation.promptLength, ctx.maxPromptLength);
  }
  const toolNames = ctx.tools?.names() ?? [];
  const interaction = ctx.interactions && Object.keys(sample.interactionKwargs).length > 0
    ? ctx.interactions.select(sample.interactionKwargs, `row ${sample.dataIndex}`)
    : ctx.interactions?.names().length === 1 && !ctx.tools
      ? ctx.interactions.select(undefined, `row ${sample.dataIndex}`)
      : undefined;
  const interactionId = interaction ? await interaction.startInteraction(undefined, sample.interactionKwargs) : undefined;

  const calls: ToolCallRecord[] = [];
  const toolRewards: number[] = [];
  const turnScores: number[] = [];
  const assistantFinish: string[] = [];
  const toolSegmentMeta: Array<Pick<TrajectorySegment, "tool_name" | "arguments" | "latency_ms" | "error">> = [];
  let userTurns = 0;
  let parseErrors = 0;
  let genMs = 0;
  let toolMs = 0;
  let retries = 0;
  let server: string | null = null;
  let weightVersion: string | null = null;
  let finish: Finish | undefined;
  const stopTokenIds = [...new Set([...model.eosTokenIds, model.endOfTurnTokenId])];

  while (!finish) {
    const remaining = ctx.maxResponseLength - conversation.responseLength;
    if (remaining <= 0) {
      finish = { status: "truncated", reason: "response_budget" };
      break;
    }
    const turn = conversation.assistantTurns;
    let result: GenerateResult;
    const generateStarted = performance.now();
    try {
      const seed = requestSeed(rollout.seed, sample, turn);
      result = await ctx.client.generate({
        inputIds: [...conversation.tokenIds],
        samplingParams: {
          maxNewTokens: remaining,
          temperature: ctx.greedy ? 0 : rollout.temperature,
          topP: ctx.greedy ? 1 : rollout.top_p,
          topK: ctx.greedy ? -1 : rollout.top_k,
          stopTokenIds,
          ...(seed === undefined ? {} : { samplingSeed: seed }),
        },
        stickyKey: id,
        signal: deadline,
      });
    } catch (err) {
      genMs += performance.now() - generateStarted;
      // A request that failed for good still made its attempts: count them, as a successful one's are below.
      if (isEngineError(err)) retries += Math.max(0, err.attempts - 1);
      if (deadline.aborted) {
        finish = { status: "aborted", reason: ctx.signal.aborted ? runAbortReason(ctx.signal) : "deadline" };
      } else if (isEngineError(err)) {
        finish = { status: "failed", reason: "error", error: errorText(err) };
      } else {
        throw err;
      }
      break;
    }
    genMs += performance.now() - generateStarted;
    retries += result.attempts - 1;
    server = result.server;
    weightVersion = result.weightVersion ?? weightVersion;
    if (result.abortedByCaller) {
      finish = { status: "aborted", reason: ctx.signal.aborted ? runAbortReason(ctx.signal) : "deadline" };
      break;
    }
    conversation.appendSampled(result.outputIds, result.logprobs);
    assistantFinish.push(result.finishReason.type);
    if (result.finishReason.type === "length") {
      // Cut mid-turn: whatever call it was writing is incomplete, so it is never parsed or executed.
      finish = { status: "truncated", reason: "length" };
      break;
    }
    if (result.finishReason.type === "abort") {
      finish = { status: "aborted", reason: "abort", error: result.finishReason.message ?? "aborted by the server" };
      break;
    }
    if (!multiTurn.enable) {
      finish = { status: "completed", reason: "stop" };
      break;
    }

    const parsed: ParseResult | undefined = ctx.tools
      ? ctx.parser.parseTokens(conversation.lastAssistantIds(), model, { tools: toolNames })
      : undefined;
    if (parsed) {
      parseErrors += parsed.errors.length;
      if (parsed.calls.length > 0) {
        const toolCalls: ToolCall[] = parsed.calls.map((call) => ({
          type: "function",
          function: { name: call.name, arguments: call.arguments },
        }));
        conversation.recordToolCalls(toolCalls, parsed.normalText);
      }
    }
    const attempted = parsed !== undefined && (parsed.calls.length > 0 || parsed.errors.length > 0);

    if (multiTurn.max_assistant_turns !== null && conversation.assistantTurns >= multiTurn.max_assistant_turns) {
      finish = { status: "completed", reason: attempted ? "max_assistant_turns" : "stop" };
      break;
    }
    if (multiTurn.max_user_turns !== null && userTurns >= multiTurn.max_user_turns && (attempted || interaction)) {
      finish = { status: "completed", reason: "max_user_turns" };
      break;
    }

    let environment: ChatMessage[];
    if (attempted && parsed) {
      const toolStarted = performance.now();
      const observations = await executeCalls(parsed, turn, sample, ctx, deadline);
      toolMs += performance.now() - toolStarted;
      for (const record of observations) {
        calls.push(record);
        if (typeof record.step_reward === "number" && record.error_kind == null) toolRewards.push(record.step_reward);
      }
      toolSegmentMeta.push({
        tool_name: observations.map((o) => o.name).join(","),
        arguments: observations.length === 1 ? observations[0]!.arguments : JSON.stringify(observations.map((o) => o.arguments)),
        latency_ms: Math.max(0, ...observations.map((o) => o.latency_ms)),
        error: observations.filter((o) => o.error).map((o) => `${o.name}: ${o.error}`).join("; ") || null,
      });
      environment = observations.map((o) => ({ role: "tool", content: o.response }));
    } else if (interaction && interactionId !== undefined) {
      const reply = await interaction.generateResponse(
        interactionId,
        conversation.messages as Parameters<typeof interaction.generateResponse>[1],
        sample.interactionKwargs,
      );
      turnScores.push(reply.turnScore);
      environment = [{ role: "user", content: reply.text }];
      if (reply.shouldTerminate) {
        // verl appends the closing user turn too; the trajectory is complete either way, room or not.
        if (conversation.appendEnvironment(environment, { maxResponseLength: ctx.maxResponseLength }).appended) userTurns += 1;
        finish = { status: "completed", reason: "interaction_done" };
        break;
      }
    } else {
      finish = { status: "completed", reason: "stop" };
      break;
    }
    const appended = conversation.appendEnvironment(environment, { maxResponseLength: ctx.maxResponseLength });
    if (!appended.appended) {
      finish = { status: "truncated", reason: "response_budget" };
      break;
    }
    userTurns += 1;
  }

  ctx.client.forgetStickyKey(id);
  const drift = conversation.driftMode === "off" ? undefined : conversation.driftCheck();
  const record = conversation.export();
  const responseText = model.decode(record.responseIds, { skipSpecialTokens: true });
  let reward = { score: 0, extra: {} as Record<string, unknown> };
  let rewardError: string | undefined;
  try {
    reward = await computeReward(
      {
        dataSource: sample.dataSource,
        responseText,
        groundTruth: sample.groundTruth,
        extraInfo: sample.extraInfo,
        toolRewards,
        turnScores,
      },
      ctx.rewardFunction,
      ctx.rewardKwargs,
    );
  } catch (err) {
    if (!ctx.rewardFunction) throw err;
    rewardError = `reward function failed: ${errorText(err)}`;
  }

  let toolSegment = 0;
  let assistantSegment = 0;
  const segments: TrajectorySegment[] = record.segments.map((segment) => {
    const base = {
      kind: segment.kind,
      turn: segment.turn,
      start: segment.start,
      end: segment.end,
      text: segment.text,
      tool_name: null,
      arguments: null,
      latency_ms: null,
      error: null,
      finish_reason: null,
    } satisfies TrajectorySegment;
    if (segment.kind === "assistant") return { ...base, finish_reason: assistantFinish[assistantSegment++] ?? null };
    if (segment.kind === "tool") return { ...base, ...(toolSegmentMeta[toolSegment++] ?? {}) };
    return base;
  });

  const final = finish ?? { status: "completed" as const, reason: "stop" };
  const failed = rewardError !== undefined;
  return {
    format_version: TRAJECTORY_FORMAT_VERSION,
    id,
    data_index: sample.dataIndex,
    sample_index: sample.sampleIndex,
    group_id: sample.groupId,
    data_source: sample.dataSource,
    ground_truth: sample.groundTruth,
    status: failed ? "failed" : final.status,
    finish_reason: failed ? "reward_error" : final.reason,
    error: rewardError ?? final.error ?? null,
    prompt_ids: record.promptIds,
    response_ids: record.responseIds,
    response_mask: record.responseMask,
    response_logprobs: record.responseLogprobs,
    trainer_logprobs: null,
    segments,
    calls,
    messages: JSON.stringify(record.messages),
    reward: reward.score,
    score: reward.score,
    tool_rewards: toolRewards,
    turn_scores: turnScores,
    reward_extra: Object.keys(reward.extra).length ? JSON.stringify(reward.extra) : null,
    advantage: null,
    num_turns: record.assistantTurns + userTurns + 1,
    assistant_turns: record.assistantTurns,
    user_turns: userTurns,
    tool_calls: calls.filter((c) => !c.error_kind?.startsWith("parse:")).length,
    tool_errors: calls.filter((c) => c.error_kind != null && !c.error_kind.startsWith("parse:")).length,
    parse_errors: parseErrors,
    drift: drift?.status ?? "skipped",
    drift_detail: drift && drift.status !== "match" ? JSON.stringify(drift) : null,
    server,
    weight_version: weightVersion,
    step: ctx.step ?? null,
    started_at: startedAt,
    gen_ms: genMs,
    tool_ms: toolMs,
    total_ms: Date.now() - startedAt,
    retries,
  };
}

/**
 * Runs the calls of one assistant turn in parallel (the first max_parallel_calls of them), and turns every parse
 * error and every call over the limit into an error observation, so the model learns what went wrong.
 */
async function executeCalls(
  parsed: ParseResult,
  turn: number,
  sample: Sample,
  ctx: TrajectoryContext,
  signal: AbortSignal,
): Promise<ToolCallRecord[]> {
  const multiTurn = ctx.rollout.multi_turn;
  const limit = multiTurn.max_parallel_calls;
  const runnable = parsed.calls.slice(0, limit);
  const executed = await Promise.all(
    runnable.map(async (call) => {
      const outcome = await runToolCall(
        ctx.tools!,
        { name: call.name, arguments: call.arguments },
        sample.toolsKwargs as ToolsKwargs,
        {
          timeoutMs: multiTurn.tool_timeout * 1000,
          signal,
          maxToolResponseLength: multiTurn.max_tool_response_length,
          toolResponseTruncateSide: multiTurn.tool_response_truncate_side,
        },
      );
      return {
        turn,
        name: call.name,
        arguments: JSON.stringify(call.arguments),
        response: outcome.text,
        latency_ms: outcome.metrics.latencyMs,
        step_reward: outcome.reward,
        error_kind: outcome.metrics.errorKind,
        error: outcome.metrics.errorMessage,
      } satisfies ToolCallRecord;
    }),
  );
  const skipped = parsed.calls.slice(limit).map(
    (call): ToolCallRecord => ({
      turn,
      name: call.name,
      arguments: JSON.stringify(call.arguments),
      response: `Error when executing tool: only ${limit} tool call(s) per turn are executed; this call was skipped.`,
      latency_ms: 0,
      step_reward: null,
      error_kind: "over_parallel_limit",
      error: `more than max_parallel_calls=${limit} calls in one turn`,
    }),
  );
  const parseFailures = parsed.errors.map(
    (error): ToolCallRecord => ({
      turn,
      name: error.name ?? "",
      arguments: "{}",
      response: `Error when parsing tool call: ${error.message}`,
      latency_ms: 0,
      step_reward: null,
      error_kind: `parse:${error.kind}`,
      error: error.message,
    }),
  );
  return [...executed, ...skipped, ...parseFailures];
}
