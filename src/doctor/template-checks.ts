/**
 * The checks that need only the local model folder: the chat template renders the tools and keeps every earlier
 * token unchanged over a tool-call round trip (the drift check a rollout runs), and the configured function-call
 * parser reads back the call the template itself writes. Both would otherwise surface mid-rollout as drift warnings
 * or as every tool call failing to parse.
 */
import { isDeepStrictEqual } from "node:util";
import { replayConversation, type ChatMessage, type ChatModel, type Conversation, type Segment, type ToolSchema } from "../chat/index.js";
import { detectParserFormat, getParser } from "../parsers/index.js";
import type { CheckResult } from "./types.js";

/** Used when no --tools file is given: one function with a string and a number argument. */
export const PROBE_TOOL: ToolSchema = {
  type: "function",
  function: {
    name: "doctor_probe_lookup",
    description: "Look something up (agentrl doctor's probe tool).",
    parameters: {
      type: "object",
      properties: { query: { type: "string", description: "what to look up" }, limit: { type: "integer" } },
      required: ["query", "limit"],
    },
  },
};

interface JsonSchemaLike {
  type?: unknown;
  enum?: unknown;
  properties?: Record<string, JsonSchemaLike>;
  required?: unknown;
}

/** A plausible value of a JSON-schema type, for the round-trip call's arguments. */
function sampleValue(schema: JsonSchemaLike | undefined): unknown {
  if (Array.isArray(schema?.enum) && schema.enum.length > 0) return schema.enum[0];
  const type = Array.isArray(schema?.type) ? schema.type[0] : schema?.type;
  switch (type) {
    case "integer":
      return 3;
    case "number":
      return 2.5;
    case "boolean":
      return true;
    case "array":
      return ["a"];
    case "object":
      return { key: "value" };
    default:
      return "42";
  }
}

/** Arguments for a call of `tool`: every required property (or the first one) with a sample value. */
export function sampleArguments(tool: ToolSchema): Record<string, unknown> {
  const parameters = ((tool.function as { parameters?: JsonSchemaLike } | undefined)?.parameters ?? {}) as JsonSchemaLike;
  const properties = parameters.properties ?? {};
  const required = Array.isArray(parameters.required) ? (parameters.required as unknown[]).filter((k): k is string => typeof k === "string") : [];
  const keys = required.length > 0 ? required : Object.keys(properties).slice(0, 1);
  return Object.fromEntries(keys.map((key) => [key, sampleValue(properties[key])]));
}

export function toolName(tool: ToolSchema): string {
  return String((tool.function as { name?: unknown } | undefined)?.name ?? "");
}

/** A short conversation with one tool call and its result, then a final answer. */
export function roundTripMessages(tool: ToolSchema): ChatMessage[] {
  return [
    { role: "user", content: "Please look this up with the tool and tell me the result." },
    {
      role: "assistant",
      content: "",
      tool_calls: [{ id: "call_0", type: "function", function: { name: toolName(tool), arguments: sampleArguments(tool) } }],
    },
    { role: "tool", content: "The result is 42.", tool_call_id: "call_0", name: toolName(tool) },
    { role: "assistant", content: "The result is 42." },
  ];
}

/** True when the first differing token lies in a sampled (assistant) segment rather than in what the environment appended. */
function driftInSampledTurn(segments: readonly Segment[], index: number): boolean {
  const segment = segments.find((s) => index >= s.start && index < s.end);
  return segment?.kind === "assistant";
}

export interface TemplateCheckResults {
  template: CheckResult;
  format: CheckResult;
}

const TEMPLATE_TITLE = "chat template: tools render, prefixes kept over a tool-call round trip";
const formatTitle = (format: string) => `function-call format '${format}' parses the template's own tool call`;

export function checkTemplateAndFormat(
  model: ChatModel,
  tools: readonly ToolSchema[],
  format: string,
  templateKwargs: Record<string, unknown> = {},
): TemplateCheckResults {
  const offered = tools.length > 0 ? tools : [PROBE_TOOL];
  const messages = roundTripMessages(offered[0]!);
  let conversation: Conversation;
  try {
    conversation = replayConversation(model, messages, { tools: offered, templateKwargs, driftMode: "strict" }, "doctor round trip");
  } catch (err) {
    const detail = `the template cannot render a tool-call round trip: ${(err as Error).message}`;
    return {
      template: { id: "template", title: TEMPLATE_TITLE, status: "fail", detail, hint: "fix the chat template (or pass --model with the right one)" },
      format: { id: "format", title: formatTitle(format), status: "skip", detail: "needs a rendered tool call" },
    };
  }
  const promptText = model.render(messages.slice(0, 1), { tools: offered, templateKwargs, addGenerationPrompt: true });
  const missing = offered.map(toolName).filter((name) => !promptText.includes(name));
  return {
    template: missing.length > 0 ? toolsIgnored(missing) : roundTripDrift(conversation, offered.length),
    format: parseOwnCall(model, conversation, offered, format),
  };
}

/** The rendered prompt does not name some offered tools: the template ignores `tools`. */
function toolsIgnored(missing: readonly string[]): CheckResult {
  return {
    id: "template",
    title: TEMPLATE_TITLE,
    status: "fail",
    detail: `the rendered prompt does not mention the tool${missing.length > 1 ? "s" : ""} ${missing.join(", ")}: the template ignores 'tools'`,
    hint: "use the model's tool-calling chat template (tokenizer_config.json chat_template or chat_template.jinja)",
  };
}

/** The template check's verdict on the drift check a rollout runs after the round trip. */
function roundTripDrift(conversation: Conversation, toolCount: number): CheckResult {
  const drift = conversation.driftCheck("strict");
  const base = { id: "template", title: TEMPLATE_TITLE } as const;
  const excerpts = (sampled: string, rendered: string) =>
    `${sampled} ${JSON.stringify(drift.accumulatedExcerpt)} vs ${rendered} ${JSON.stringify(drift.renderedExcerpt)}`;
  if (drift.status === "reasoning_only") {
    // Qwen3 drops an earlier turn's (empty) <think> block once it is not the last message. The record keeps what
    // the engine saw, so training is unaffected; rollouts count it apart from drift.
    return {
      ...base,
      status: "warn",
      detail:
        `the template drops or adds reasoning blocks when it re-renders an earlier assistant turn (token ` +
        `${drift.firstDifference}: ${excerpts("sampled", "re-rendered")}); the tool result and next prompt match`,
      hint: "harmless to training (the record keeps what the engine saw); trajectories show drift: reasoning_only (docs/conversation.md)",
    };
  }
  if (drift.status === "drift" && driftInSampledTurn(conversation.segments, drift.firstDifference)) {
    // Another rewrite of an earlier assistant turn: the record keeps what the engine saw; rollouts report drift.
    return {
      ...base,
      status: "warn",
      detail:
        `the template re-renders an earlier assistant turn differently (token ${drift.firstDifference}: ` +
        `${excerpts("sampled", "re-rendered")}); the tool result and next prompt match`,
      hint: "harmless to training (the record keeps what the engine saw); rollouts will count it as drift (docs/conversation.md)",
    };
  }
  if (drift.status === "drift") {
    return {
      ...base,
      status: "fail",
      detail: `re-rendering the conversation changes token ${drift.firstDifference}: ${excerpts("accumulated", "rendered")}`,
      hint: "the tool result or next prompt renders differently inside the conversation than appended after it; run 'agentrl template' on such a conversation",
    };
  }
  if (drift.status === "whitespace_only") {
    return {
      ...base,
      status: "warn",
      detail: `only whitespace differs at token ${drift.firstDifference}; strict drift checks will flag it`,
      hint: "set multi_turn.tokenization_sanity_check_mode: ignore_strippable",
    };
  }
  return {
    ...base,
    status: "pass",
    detail: `${toolCount} tool${toolCount > 1 ? "s" : ""} rendered; ${conversation.tokenIds.length} tokens over 2 assistant turns match a fresh render`,
  };
}

/** The format check: the parser reads back exactly the call the template wrote in the first assistant turn. */
function parseOwnCall(model: ChatModel, conversation: Conversation, offered: readonly ToolSchema[], format: string): CheckResult {
  const tool = offered[0]!;
  // The first assistant turn is exactly the tokens the template writes for the call.
  const turn = conversation.segments.find((segment) => segment.kind === "assistant" && segment.turn === 0);
  const ids = turn ? conversation.idsBetween(turn.start, turn.end) : [];
  try {
    const resolved = format === "auto" ? `auto → ${detectParserFormat(model.chatTemplate, model.addedTokens())}` : format;
    const parser = getParser(format, { chatTemplate: model.chatTemplate, specialTokens: model.addedTokens() });
    const parsed = parser.parseTokens(ids, model, { tools: offered.map(toolName) });
    const expected = { name: toolName(tool), arguments: sampleArguments(tool) };
    const got = parsed.calls.map((call) => ({ name: call.name, arguments: call.arguments }));
    const title = formatTitle(resolved);
    if (got.length === 1 && isDeepStrictEqual(got[0], expected)) {
      return { id: "format", title, status: "pass", detail: `parsed ${expected.name}(${JSON.stringify(expected.arguments)})` };
    }
    const errors = parsed.errors.map((e) => `${e.kind}: ${e.message}`).join("; ");
    return {
      id: "format",
      title,
      status: "fail",
      detail:
        `the template writes ${JSON.stringify(model.decode(ids))}, which parses to ${JSON.stringify(got)}` +
        (errors ? ` (${errors})` : "") + `, expected ${JSON.stringify([expected])}`,
      hint: "choose the format matching this template with --format (qwen25, hermes, llama3, mistral, deepseekv3, pythonic, gpt-oss)",
    };
  } catch (err) {
    return { id: "format", title: formatTitle(format), status: "fail", detail: (err as Error).message, hint: "pass --format explicitly" };
  }
}
