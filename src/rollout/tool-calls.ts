/**
 * The calls of one assistant turn, run and turned into records: the first max_parallel_calls run in parallel, and
 * every call over that limit and every parse error becomes an error observation, so the model learns what went wrong.
 */
import type { ParseResult } from "../parsers/index.js";
import { runToolCall, type ToolsKwargs } from "../tools/index.js";
import type { ToolCallRecord } from "../data/trajectory.js";
import type { ToolSegmentMeta, TrajectoryInFlight } from "./trajectory-state.js";

/** The records of one turn's calls (`turn`: the assistant turn that made them), in the order the model sees them. */
export async function executeCalls(run: TrajectoryInFlight, parsed: ParseResult, turn: number): Promise<ToolCallRecord[]> {
  const limit = run.ctx.rollout.multi_turn.max_parallel_calls;
  const executed = await Promise.all(parsed.calls.slice(0, limit).map((call) => executeCall(run, call, turn)));
  const skipped = parsed.calls.slice(limit).map(
    (call): ToolCallRecord => ({
      turn,
      name: call.name,
      arguments: call.arguments,
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
      arguments: {},
      response: `Error when parsing tool call: ${error.message}`,
      latency_ms: 0,
      step_reward: null,
      error_kind: `parse:${error.kind}`,
      error: error.message,
    }),
  );
  return [...executed, ...skipped, ...parseFailures];
}

async function executeCall(run: TrajectoryInFlight, call: ParseResult["calls"][number], turn: number): Promise<ToolCallRecord> {
  const multiTurn = run.ctx.rollout.multi_turn;
  const outcome = await runToolCall(
    run.ctx.tools!,
    { name: call.name, arguments: call.arguments },
    run.sample.toolsKwargs as ToolsKwargs,
    {
      timeoutMs: multiTurn.tool_timeout * 1000,
      signal: run.deadline,
      maxToolResponseLength: multiTurn.max_tool_response_length,
      toolResponseTruncateSide: multiTurn.tool_response_truncate_side,
      ...(run.toolSession ? { session: run.toolSession } : {}),
      agentData: { trajectoryId: run.id, turn, messages: [...run.conversation.messages] },
    },
  );
  return {
    turn,
    name: call.name,
    arguments: call.arguments,
    response: outcome.text,
    latency_ms: outcome.metrics.latencyMs,
    step_reward: outcome.reward,
    error_kind: outcome.metrics.errorKind,
    error: outcome.metrics.errorMessage,
  };
}

/** The tool segment of one turn's calls: their names, arguments, the slowest latency and the errors. */
export function toolSegmentOf(records: readonly ToolCallRecord[]): ToolSegmentMeta {
  return {
    tool_name: records.map((o) => o.name).join(","),
    arguments: records.length === 1 ? records[0]!.arguments : records.map((o) => o.arguments),
    latency_ms: Math.max(0, ...records.map((o) => o.latency_ms)),
    error: records.filter((o) => o.error).map((o) => `${o.name}: ${o.error}`).join("; ") || null,
  };
}
