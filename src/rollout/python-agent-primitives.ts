/**
 * The AgentLoopApi as the Python agent loop host calls it: one function per primitive, each validating the arguments
 * that come from the user's Python code and answering in the host's snake_case. The host never sees a token record it
 * could change; every answer is a copy.
 */
import { z } from "zod";
import { chatMessageSchema } from "../chat/messages.js";
import type { ParseResult } from "../parsers/index.js";
import { formatIssues } from "../zod-issues.js";
import type { AgentLoopApi, ToolCallRequest } from "./agent-loop.js";

const callRequestSchema = z.object({ name: z.string().min(1), arguments: z.record(z.string(), z.unknown()) });

/** What parse_tool_calls answered, handed back (the host's snake_case), or calls the loop names itself. */
const callsSchema = z.union([
  z.array(callRequestSchema),
  z.object({
    normal_text: z.string().default(""),
    calls: z.array(callRequestSchema.extend({ raw: z.string().optional() })),
    errors: z.array(z.looseObject({ kind: z.string(), message: z.string(), raw: z.string() })).default([]),
    has_call_marker: z.boolean().default(true),
  }),
]);

const argsSchemas = {
  generate: z.object({ max_new_tokens: z.number().int().positive().nullish() }),
  call_tools: z.object({ calls: callsSchema }),
  append: z.object({ messages: z.array(chatMessageSchema) }),
  turn_limit: z.object({ attempted_call: z.boolean() }),
};

function parsed<K extends keyof typeof argsSchemas>(op: K, args: unknown): z.infer<(typeof argsSchemas)[K]> {
  const result = argsSchemas[op].safeParse(args);
  if (!result.success) throw new Error(`${op}: bad arguments: ${formatIssues(result.error)}`);
  return result.data as z.infer<(typeof argsSchemas)[K]>;
}

function toParseResult(calls: z.infer<typeof callsSchema>): ParseResult | readonly ToolCallRequest[] {
  if (Array.isArray(calls)) return calls;
  return {
    normalText: calls.normal_text,
    calls: calls.calls.map((call) => ({ name: call.name, arguments: call.arguments, raw: call.raw ?? JSON.stringify(call) })),
    errors: calls.errors as ParseResult["errors"],
    hasCallMarker: calls.has_call_marker,
  };
}

function fromParseResult(result: ParseResult | undefined): unknown {
  if (!result) return null;
  return { normal_text: result.normalText, calls: result.calls, errors: result.errors, has_call_marker: result.hasCallMarker };
}

type Primitive = (api: AgentLoopApi, args: unknown) => unknown;

export const PRIMITIVES: Readonly<Record<string, Primitive>> = {
  async generate(api, args) {
    const cap = parsed("generate", args).max_new_tokens;
    const { finishReason, ...generation } = await api.generate(cap == null ? {} : { maxNewTokens: cap });
    return { ...generation, finish_reason: finishReason };
  },
  parse_tool_calls: (api) => fromParseResult(api.parseToolCalls()),
  call_tools: (api, args) => api.callTools(toParseResult(parsed("call_tools", args).calls)),
  interact: (api) => api.interact(),
  append: (api, args) => api.append(parsed("append", args).messages),
  turn_limit: (api, args) => api.turnLimit(parsed("turn_limit", args).attempted_call),
  run_tool_loop: (api) => api.runToolLoop(),
  messages: (api) => api.messages(),
  tokens(api) {
    const view = api.tokens();
    return { ids: view.ids, mask: view.mask, prompt_length: view.promptLength, response_length: view.responseLength, assistant_turns: view.assistantTurns };
  },
};

/** What the host's loop sees of its trajectory: the row (snake_case, as verl names its columns) and the settings. */
export function trajectoryInfo(api: AgentLoopApi): Record<string, unknown> {
  const { sample } = api;
  return {
    id: api.id,
    sample: {
      messages: sample.messages,
      ground_truth: sample.groundTruth,
      data_source: sample.dataSource,
      tools_kwargs: sample.toolsKwargs,
      interaction_kwargs: sample.interactionKwargs,
      extra_info: sample.extraInfo,
      agent_name: sample.agentName,
      data_index: sample.dataIndex,
      sample_index: sample.sampleIndex,
      group_id: sample.groupId,
    },
    multi_turn: api.multiTurn,
    has_interaction: api.hasInteraction,
  };
}
