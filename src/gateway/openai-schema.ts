/**
 * The OpenAI chat-completions wire format, as far as the gateway speaks it: the request (zod, loose, because the SDKs
 * and frameworks send fields of their own), the error body every 4xx/5xx carries, and the message normalisation
 * that both the template and the prefix match read.
 */
import { z } from "zod";
import type { ChatMessage, ToolCall } from "../chat/index.js";

const contentPartSchema = z.looseObject({ type: z.string(), text: z.string().optional() });
const contentSchema = z.union([z.string(), z.null(), z.array(contentPartSchema)]).optional();

const requestToolCallSchema = z.looseObject({
  id: z.string().optional(),
  type: z.string().optional(),
  function: z.looseObject({ name: z.string(), arguments: z.union([z.string(), z.record(z.string(), z.unknown())]) }),
});

export const requestMessageSchema = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool", "function"]),
  content: contentSchema,
  name: z.string().optional(),
  tool_calls: z.array(requestToolCallSchema).nullish(),
  tool_call_id: z.string().optional(),
  reasoning_content: z.string().nullish(),
});

const functionToolSchema = z.looseObject({
  type: z.literal("function"),
  function: z.looseObject({ name: z.string().min(1), description: z.string().optional(), parameters: z.unknown().optional() }),
});

export const toolChoiceSchema = z.union([
  z.enum(["auto", "none", "required"]),
  z.looseObject({ type: z.literal("function"), function: z.looseObject({ name: z.string() }) }),
]);

/** The most alternatives per token OpenAI's API takes (`top_logprobs`). */
export const MAX_TOP_LOGPROBS = 20;

export const chatCompletionRequestSchema = z.looseObject({
  model: z.string().optional(),
  messages: z.array(requestMessageSchema).min(1, "expected at least one message"),
  tools: z.array(functionToolSchema).nullish(),
  tool_choice: toolChoiceSchema.nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().optional() }).nullish(),
  max_tokens: z.number().int().positive().nullish(),
  max_completion_tokens: z.number().int().positive().nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullish(),
  n: z.number().int().positive().nullish(),
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
  logprobs: z.boolean().nullish(),
  /** OpenAI's range: 0 to 20 alternatives per token. */
  top_logprobs: z.number().int().min(0).max(MAX_TOP_LOGPROBS).nullish(),
  response_format: z.looseObject({ type: z.string() }).nullish(),
});
export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;
export type RequestMessage = z.infer<typeof requestMessageSchema>;
export type ToolChoice = z.infer<typeof toolChoiceSchema>;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);
const isNullish = (value: unknown): value is null | undefined => value === undefined || value === null;
const ROLES = new Set(["system", "developer", "user", "assistant", "tool", "function"]);
const CHOICES = new Set(["auto", "none", "required"]);
const nullishOf = (value: unknown, check: (value: unknown) => boolean) => isNullish(value) || check(value);
const isString = (value: unknown) => typeof value === "string";
const isBoolean = (value: unknown) => typeof value === "boolean";
const isPositiveInt = (value: unknown) => Number.isSafeInteger(value) && (value as number) > 0;
const isFiniteNumber = (value: unknown) => Number.isFinite(value);
const isTopLogprobs = (value: unknown) => Number.isSafeInteger(value) && (value as number) >= 0 && (value as number) <= MAX_TOP_LOGPROBS;

function isUsualMessage(message: unknown): boolean {
  if (!isObject(message) || !ROLES.has(message.role as string)) return false;
  const { content, tool_calls: calls } = message;
  if (content !== undefined && content !== null && typeof content !== "string") {
    if (!Array.isArray(content)) return false;
    for (const part of content) if (!isObject(part) || typeof part.type !== "string" || (part.text !== undefined && typeof part.text !== "string")) return false;
  }
  if (message.name !== undefined && typeof message.name !== "string") return false;
  if (message.tool_call_id !== undefined && typeof message.tool_call_id !== "string") return false;
  if (!nullishOf(message.reasoning_content, isString)) return false;
  if (isNullish(calls)) return true;
  if (!Array.isArray(calls)) return false;
  for (const call of calls) {
    if (!isObject(call) || (call.id !== undefined && typeof call.id !== "string") || (call.type !== undefined && typeof call.type !== "string")) return false;
    const fn = call.function;
    if (!isObject(fn) || typeof fn.name !== "string" || typeof fn.arguments !== "string") return false;
  }
  return true;
}

function isUsualTool(tool: unknown): boolean {
  if (!isObject(tool) || tool.type !== "function") return false;
  const fn = tool.function;
  return isObject(fn) && typeof fn.name === "string" && fn.name !== "" && (fn.description === undefined || typeof fn.description === "string");
}

/**
 * The usual chat-completion request, checked by hand: returns the body itself when every field the schema reads is of
 * the usual kind (object arguments, for one, are not), undefined for anything else, which then goes to the zod schema
 * and its error. Accepts nothing the schema refuses and changes nothing (test/openai-gateway-schema.test.ts compares
 * the two); it exists because zod's walk and copy of the whole history was a visible share of the gateway's CPU per
 * turn (bench/gateway-overhead.mjs).
 */
export function usualChatCompletionRequest(body: Record<string, unknown>): ChatCompletionRequest | undefined {
  const { messages, tools, tool_choice: choice, stream_options: streamOptions, stop, response_format: format } = body;
  if (!Array.isArray(messages) || messages.length === 0) return undefined;
  for (const message of messages) if (!isUsualMessage(message)) return undefined;
  if (!isNullish(tools)) {
    if (!Array.isArray(tools)) return undefined;
    for (const tool of tools) if (!isUsualTool(tool)) return undefined;
  }
  if (!isNullish(choice) && !CHOICES.has(choice as string)) {
    if (!isObject(choice) || choice.type !== "function" || !isObject(choice.function) || typeof choice.function.name !== "string") return undefined;
  }
  if (!isNullish(streamOptions) && (!isObject(streamOptions) || (streamOptions.include_usage !== undefined && typeof streamOptions.include_usage !== "boolean"))) return undefined;
  if (!isNullish(stop) && typeof stop !== "string" && !(Array.isArray(stop) && stop.length <= 4 && stop.every(isString))) return undefined;
  if (!isNullish(format) && (!isObject(format) || typeof format.type !== "string")) return undefined;
  const usual =
    (body.model === undefined || typeof body.model === "string") &&
    nullishOf(body.stream, isBoolean) &&
    nullishOf(body.logprobs, isBoolean) &&
    nullishOf(body.top_logprobs, isTopLogprobs) &&
    nullishOf(body.max_tokens, isPositiveInt) &&
    nullishOf(body.max_completion_tokens, isPositiveInt) &&
    nullishOf(body.n, isPositiveInt) &&
    nullishOf(body.temperature, isFiniteNumber) &&
    nullishOf(body.top_p, isFiniteNumber);
  return usual ? (body as ChatCompletionRequest) : undefined;
}

/** A request body, validated: the usual shape by hand, anything else by the schema (with its error). */
export function parseChatCompletionRequest(body: Record<string, unknown>): ReturnType<typeof chatCompletionRequestSchema.safeParse> {
  const usual = usualChatCompletionRequest(body);
  return usual ? { success: true, data: usual } : chatCompletionRequestSchema.safeParse(body);
}

/** Fields a request may carry that change nothing here: read and let go, without a note. */
const QUIET_FIELDS = new Set([
  "model", "messages", "tools", "tool_choice", "stream", "stream_options", "max_tokens", "max_completion_tokens", "stop",
  "n", "temperature", "top_p", "logprobs", "response_format", "parallel_tool_calls", "user", "metadata", "store",
  "seed", "service_tier", "top_logprobs", "chat_template_kwargs", "separate_reasoning",
]);

/**
 * The request's fields the gateway does not act on (frequency_penalty, logit_bias, ...), for the run's notes: those
 * set and not in `quiet` (by default the chat-completions fields read quietly; responses-api.ts passes its own).
 */
export function ignoredFields(body: Record<string, unknown>, quiet: ReadonlySet<string> = QUIET_FIELDS): string[] {
  return Object.keys(body).filter((key) => !quiet.has(key) && body[key] !== null && body[key] !== undefined);
}

/**
 * The grammar a `response_format` asks for, as the JSON-schema text SGLang's `json_schema` sampling parameter takes
 * (as SGLang's own OpenAI server maps it): `json_object` is any object, `json_schema` its `json_schema.schema`.
 * Undefined for text; a 400 naming the field for anything else.
 */
export function responseFormatGrammar(format: unknown): string | undefined {
  if (format === undefined || format === null) return undefined;
  const type = isObject(format) ? format.type : undefined;
  if (type === "text") return undefined;
  if (type === "json_object") return JSON_OBJECT_SCHEMA;
  if (type === "json_schema") {
    const spec = (format as Record<string, unknown>).json_schema;
    const schema = isObject(spec) ? spec.schema : undefined;
    if (!isObject(schema)) throw new GatewayError(400, "response_format json_schema needs json_schema.schema, a JSON schema object", "invalid_request", "response_format.json_schema.schema");
    return JSON.stringify(schema);
  }
  throw new GatewayError(400, `response_format ${String(type)} is not supported: text, json_object or json_schema`, "unsupported_parameter", "response_format");
}

const JSON_OBJECT_SCHEMA = JSON.stringify({ type: "object" });

/** A request the gateway refuses, as OpenAI's API would: its HTTP status and error body. */
export class GatewayError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string,
    readonly param: string | null = null,
    readonly type = status >= 500 ? "server_error" : "invalid_request_error",
  ) {
    super(message);
  }

  body(): { error: { message: string; type: string; param: string | null; code: string } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/**
 * Refuses a content part that is not text (`image_url`, `input_audio`, `file`, ...), naming it, as OpenAI's text
 * models do: the chat template renders text, and a part left out would change the conversation without a word.
 */
export function refuseNonTextParts(messages: readonly RequestMessage[]): void {
  messages.forEach((message, i) => {
    if (!Array.isArray(message.content)) return;
    message.content.forEach((part, j) => {
      if (part.type !== "text") {
        throw new GatewayError(400, `messages[${i}].content[${j}] is a ${part.type} part: the gateway renders text only`, "unsupported_parameter", `messages.${i}.content.${j}.type`);
      }
    });
  });
}

/** The text of a message's content: a string as it is, text parts joined, nothing as "". */
export function contentText(content: RequestMessage["content"] | ChatMessage["content"]): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((part) => (part && typeof part === "object" && typeof (part as { text?: unknown }).text === "string" ? (part as { text: string }).text : "")).join("");
}

/**
 * A request message as the chat template renders it: `developer` is the template's `system`, content parts become
 * text, tool-call arguments stay as sent (the template's normalisation parses JSON strings).
 */
export function toChatMessage(message: RequestMessage): ChatMessage {
  const role = message.role === "developer" ? "system" : message.role === "function" ? "tool" : message.role;
  const out: ChatMessage = { role, content: contentText(message.content) };
  if (message.tool_calls && message.tool_calls.length > 0) {
    out.tool_calls = message.tool_calls.map((call): ToolCall => ({ type: "function", function: { name: call.function.name, arguments: call.function.arguments } }));
  }
  if (message.tool_call_id !== undefined) out.tool_call_id = message.tool_call_id;
  if (message.name !== undefined && role === "tool") out.name = message.name;
  if (typeof message.reasoning_content === "string" && message.reasoning_content !== "") out.reasoning_content = message.reasoning_content;
  return out;
}
