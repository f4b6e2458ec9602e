/**
 * Chat messages and tool schemas in the OpenAI shape that chat templates expect, their zod schemas for input read
 * from files, and the one normalisation the templates need before rendering.
 */
import { z } from "zod";

export interface ToolCallFunction {
  name: string;
  /** An object, or a JSON string as OpenAI clients send it; rendering turns the string into an object. */
  arguments: Record<string, unknown> | string;
}

export interface ToolCall {
  id?: string;
  type?: string;
  function: ToolCallFunction;
}

export interface ChatMessage {
  role: string;
  content?: string | null | unknown[];
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  name?: string;
  reasoning_content?: string;
  [extra: string]: unknown;
}

/** An OpenAI function tool schema, passed to the template untouched. */
export type ToolSchema = Record<string, unknown>;

export const toolCallSchema = z.looseObject({
  id: z.string().optional(),
  type: z.string().optional(),
  function: z.looseObject({
    name: z.string(),
    arguments: z.union([z.record(z.string(), z.unknown()), z.string()]),
  }),
});

export const chatMessageSchema = z.looseObject({
  role: z.string().min(1),
  content: z.union([z.string(), z.null(), z.array(z.unknown())]).optional(),
  tool_calls: z.array(toolCallSchema).optional(),
  tool_call_id: z.string().optional(),
  name: z.string().optional(),
  reasoning_content: z.string().optional(),
});

export const chatMessagesSchema = z.array(chatMessageSchema).min(1, "expected at least one message");

export const toolSchemasSchema = z.array(
  z.looseObject({
    type: z.string().optional(),
    function: z.looseObject({ name: z.string() }).optional(),
  }),
);

/**
 * Prepares messages for a template: tool-call arguments given as JSON strings become objects (templates apply
 * `| tojson` to them, which would otherwise print a quoted string), and a missing assistant content becomes "" (the
 * Qwen templates call string methods on it). The input is not modified.
 */
export function normalizeForTemplate(messages: readonly ChatMessage[]): ChatMessage[] {
  return messages.map((message) => {
    const copy: ChatMessage = { ...message };
    if (message.role === "assistant" && (message.content === undefined || message.content === null)) copy.content = "";
    if (message.tool_calls) {
      copy.tool_calls = message.tool_calls.map((call) => ({
        ...call,
        function: { ...call.function, arguments: argumentsAsObject(call.function.arguments) },
      }));
    }
    return copy;
  });
}

/** Parses JSON-string arguments; a string that is not a JSON object is kept as it is, for the template to print. */
function argumentsAsObject(args: Record<string, unknown> | string): Record<string, unknown> | string {
  if (typeof args !== "string") return args;
  try {
    const parsed = JSON.parse(args) as unknown;
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : args;
  } catch {
    return args;
  }
}
