/**
 * OpenAI's Responses API (`POST /v1/responses`), the API the OpenAI Agents SDK calls by default and new `openai` SDK
 * code is written against, served over the same trajectory session as chat completions: a request's `instructions`
 * and `input` items become the chat messages they stand for (a function_call item joins the assistant message
 * before it, a function_call_output item is a tool message), its function tools the chat tools, and the turn the
 * session samples comes back as output items (a message with its text, a function_call per call), whole or as the
 * SSE events the SDKs assemble. A request carries its whole history, as the Agents SDK sends it, or continues one of
 * its trajectory's earlier responses by `previous_response_id` (ResponseChain); other server-side state
 * (`conversation`, stored prompts, background responses) is refused.
 */
import type http from "node:http";
import { z } from "zod";
import { formatIssues } from "../zod-issues.js";
import { sendEventStream } from "./http-reply.js";
import { GatewayError, ignoredFields, MAX_TOP_LOGPROBS, type ChatCompletionRequest, type RequestMessage } from "./openai-schema.js";
import type { Completion } from "./session.js";

const textPartSchema = z.looseObject({ type: z.string(), text: z.string().optional() });
const textSchema = z.union([z.string(), z.array(textPartSchema)]);

const messageItemSchema = z.looseObject({
  type: z.literal("message").optional(),
  role: z.enum(["system", "developer", "user", "assistant"]),
  content: textSchema,
});
const functionCallItemSchema = z.looseObject({ type: z.literal("function_call"), call_id: z.string(), name: z.string(), arguments: z.string() });
const functionCallOutputItemSchema = z.looseObject({ type: z.literal("function_call_output"), call_id: z.string(), output: textSchema });
/** Any other item (reasoning, item_reference, a hosted tool's call): refused or skipped by chatMessagesOf. */
const otherItemSchema = z.looseObject({ type: z.string() });

const toolSchema = z.looseObject({
  type: z.string(),
  name: z.string().min(1).optional(),
  description: z.string().nullish(),
  parameters: z.unknown().optional(),
});

export const responsesRequestSchema = z.looseObject({
  model: z.string().optional(),
  input: z.union([z.string(), z.array(z.union([messageItemSchema, functionCallItemSchema, functionCallOutputItemSchema, otherItemSchema])).min(1, "expected at least one item")]),
  instructions: z.string().nullish(),
  tools: z.array(toolSchema).nullish(),
  tool_choice: z.union([z.enum(["auto", "none", "required"]), z.looseObject({ type: z.string(), name: z.string().optional() })]).nullish(),
  stream: z.boolean().nullish(),
  max_output_tokens: z.number().int().positive().nullish(),
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
  previous_response_id: z.string().nullish(),
  store: z.boolean().nullish(),
  text: z.looseObject({ format: z.looseObject({ type: z.string() }).optional() }).nullish(),
  include: z.array(z.string()).nullish(),
  top_logprobs: z.number().int().min(0).max(MAX_TOP_LOGPROBS).nullish(),
});
export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;
type InputItem = Exclude<ResponsesRequest["input"], string>[number];

/** Fields that change nothing here (no server-side state, no hosted tools in use): read and let go, without a note. */
const QUIET_FIELDS = new Set([
  "model", "input", "instructions", "tools", "tool_choice", "stream", "max_output_tokens", "temperature", "top_p",
  "parallel_tool_calls", "store", "metadata", "user", "text", "include", "service_tier", "prompt_cache_key",
  "safety_identifier", "top_logprobs", "previous_response_id",
]);
/** Fields that need state or features the gateway does not have: refused, as OpenAI refuses what it cannot do. */
const REFUSED_FIELDS: Record<string, string> = {
  conversation: "the gateway keeps no conversations: send the whole conversation as `input`",
  prompt: "stored prompt templates are not available on the gateway",
  background: "background responses are not supported: every request waits for its turn",
};

/** The request as validated, or the 400 that names the first bad field. */
export function parseResponsesRequest(body: Record<string, unknown>): ResponsesRequest {
  const parsed = responsesRequestSchema.safeParse(body);
  if (!parsed.success) {
    const param = parsed.error.issues[0]?.path.join(".") || null;
    throw new GatewayError(400, `invalid request: ${formatIssues(parsed.error, { only: "first" })}`, "invalid_request", param);
  }
  for (const [field, why] of Object.entries(REFUSED_FIELDS)) {
    const value = body[field];
    if (value !== undefined && value !== null && value !== false) throw new GatewayError(400, `${field}: ${why}`, "unsupported_parameter", field);
  }
  const format = parsed.data.text?.format?.type;
  if (format !== undefined && !TEXT_FORMATS.has(format)) {
    throw new GatewayError(400, `text.format ${format} is not supported: text, json_object or json_schema`, "unsupported_parameter", "text.format");
  }
  return parsed.data;
}

/** The `include` entry that asks for the output text's log-probs. */
const OUTPUT_LOGPROBS = "message.output_text.logprobs";

const TEXT_FORMATS: ReadonlySet<string> = new Set(["text", "json_object", "json_schema"]);

/**
 * `text.format` as chat completions' `response_format`: the Responses API puts a json_schema format's name, schema and
 * strict beside its type, where chat completions nests them under `json_schema`.
 */
function responseFormatOf(format: Record<string, unknown> | undefined): ChatCompletionRequest["response_format"] {
  if (format === undefined || format.type === "text") return undefined;
  if (format.type !== "json_schema") return { type: String(format.type) };
  const { type: _type, ...spec } = format;
  return { type: "json_schema", json_schema: spec };
}

/** Not noted either: a refused field set to null or false asks for nothing. */
const UNNOTED_FIELDS: ReadonlySet<string> = new Set([...QUIET_FIELDS, ...Object.keys(REFUSED_FIELDS)]);

/** The request's fields the gateway does not act on, for the run's notes. */
export function ignoredResponsesFields(body: Record<string, unknown>): string[] {
  return ignoredFields(body, UNNOTED_FIELDS);
}

/**
 * The chat-completions request a Responses request stands for; the session samples it like any other: the request's
 * instructions, then `conversation` (its input, after the conversation of the response it continues when it names one:
 * ResponseChain.conversationOf).
 */
export function chatRequestOf(request: ResponsesRequest, conversation: readonly RequestMessage[] = inputMessagesOf(request)): ChatCompletionRequest {
  const messages = [...(request.instructions ? [{ role: "system" as const, content: request.instructions }] : []), ...conversation];
  if (messages.length === 0) throw new GatewayError(400, "input: nothing to answer (no message in it)", "invalid_request", "input");
  const tools = (request.tools ?? []).map((tool, index) => {
    if (tool.type !== "function") {
      throw new GatewayError(400, `tools[${index}]: ${tool.type} tools are not available on the gateway; declare function tools and run them in the agent`, "unsupported_parameter", `tools.${index}.type`);
    }
    if (!tool.name) throw new GatewayError(400, `tools[${index}]: a function tool needs a name`, "invalid_request", `tools.${index}.name`);
    // The chat tool the template renders, in OpenAI's key order. `strict` is a decoding constraint the model never
    // sees on OpenAI's side; the gateway has no constrained decoding, so it is left out of the prompt.
    const fn: Record<string, unknown> = { name: tool.name };
    if (tool.description != null) fn.description = tool.description;
    if (tool.parameters !== undefined) fn.parameters = tool.parameters;
    return { type: "function" as const, function: fn as { name: string } };
  });
  const choice = request.tool_choice;
  let toolChoice: ChatCompletionRequest["tool_choice"];
  if (typeof choice === "string" || choice == null) toolChoice = choice;
  else if (choice.type === "function" && choice.name) toolChoice = { type: "function", function: { name: choice.name } };
  else throw new GatewayError(400, `tool_choice ${JSON.stringify(choice)} is not supported: use auto, none, required or {"type": "function", "name": ...}`, "unsupported_parameter", "tool_choice");
  const responseFormat = responseFormatOf(request.text?.format);
  return {
    messages,
    ...(tools.length > 0 ? { tools } : {}),
    ...(toolChoice != null ? { tool_choice: toolChoice } : {}),
    ...(request.max_output_tokens != null ? { max_completion_tokens: request.max_output_tokens } : {}),
    ...(request.temperature != null ? { temperature: request.temperature } : {}),
    ...(request.top_p != null ? { top_p: request.top_p } : {}),
    ...(responseFormat ? { response_format: responseFormat } : {}),
    // Alternatives come inside the log-probs, so asking for them asks for those too.
    ...(request.include?.includes(OUTPUT_LOGPROBS) || request.top_logprobs ? { logprobs: true } : {}),
    ...(request.top_logprobs ? { top_logprobs: request.top_logprobs } : {}),
  };
}

/**
 * Each input item as the chat message it stands for: a message as itself (text parts joined), a function_call added
 * to the assistant message right before it (or opening one without text), a function_call_output as a tool message.
 * Reasoning items are the model's own text, which the gateway never returns as such: skipped.
 */
export function inputMessagesOf(request: ResponsesRequest): RequestMessage[] {
  const messages: RequestMessage[] = [];
  const items: InputItem[] = typeof request.input === "string" ? [{ role: "user", content: request.input }] : request.input;
  items.forEach((item, index) => {
    if ("role" in item && (item.type === undefined || item.type === "message")) {
      const message = item as z.infer<typeof messageItemSchema>;
      messages.push({ role: message.role, content: textOf(message.content, `input.${index}.content`) });
    } else if (item.type === "function_call") {
      const call = item as z.infer<typeof functionCallItemSchema>;
      const toolCall = { id: call.call_id, type: "function", function: { name: call.name, arguments: call.arguments } };
      const last = messages.at(-1);
      if (last?.role === "assistant") (last.tool_calls ??= []).push(toolCall);
      else messages.push({ role: "assistant", content: "", tool_calls: [toolCall] });
    } else if (item.type === "function_call_output") {
      const output = item as z.infer<typeof functionCallOutputItemSchema>;
      messages.push({ role: "tool", tool_call_id: output.call_id, content: textOf(output.output, `input.${index}.output`) });
    } else if (item.type !== "reasoning") {
      throw new GatewayError(400, `input[${index}]: ${item.type} items are not supported by the gateway (messages, function_call, function_call_output and reasoning are)`, "unsupported_parameter", `input.${index}.type`);
    }
  });
  return messages;
}

/** A content or output: a string as it is, text parts joined; any other part (an image, a file) refused. */
function textOf(content: z.infer<typeof textSchema>, param: string): string {
  if (typeof content === "string") return content;
  return content
    .map((part, index) => {
      if (part.type !== "input_text" && part.type !== "output_text" && part.type !== "text") {
        throw new GatewayError(400, `${param}[${index}]: ${part.type} parts are not supported: the gateway serves text`, "unsupported_parameter", `${param}.${index}.type`);
      }
      return part.text ?? "";
    })
    .join("");
}

type OutputItem = Record<string, unknown> & { type: string; id: string };

/** A turn's response id: its chat completion's, under the Responses API's prefix. */
const responseIdOf = (completion: Completion): string => completion.id.replace(/^chatcmpl-/, "resp_");

/** The response object for a completed turn (status `incomplete` when max_output_tokens or a budget cut it). */
export function responseOf(completion: Completion, request: ResponsesRequest, model: string, createdAt: number): Record<string, unknown> {
  const incomplete = completion.finishReason === "length";
  const turn = completion.id.slice(completion.id.lastIndexOf("-") + 1);
  const output: OutputItem[] = [];
  if (completion.reasoning !== undefined) {
    output.push({ type: "reasoning", id: `rs_${turn}`, summary: [], content: [{ type: "reasoning_text", text: completion.reasoning }] });
  }
  if (completion.content) {
    output.push({ type: "message", id: `msg_${turn}`, status: "completed", role: "assistant", content: [{ type: "output_text", text: completion.content, annotations: [], logprobs: completion.logprobs ?? [] }] });
  }
  for (const call of completion.toolCalls) {
    output.push({ type: "function_call", id: `fc_${call.id}`, call_id: call.id, name: call.function.name, arguments: call.function.arguments, status: "completed" });
  }
  return {
    id: responseIdOf(completion),
    object: "response",
    created_at: createdAt,
    status: incomplete ? "incomplete" : "completed",
    error: null,
    incomplete_details: incomplete ? { reason: "max_output_tokens" } : null,
    instructions: request.instructions ?? null,
    previous_response_id: request.previous_response_id ?? null,
    store: request.store !== false,
    max_output_tokens: request.max_output_tokens ?? null,
    model,
    output,
    parallel_tool_calls: true,
    temperature: request.temperature ?? null,
    tool_choice: request.tool_choice ?? "auto",
    tools: request.tools ?? [],
    top_p: request.top_p ?? null,
    text: { format: request.text?.format ?? { type: "text" } },
    metadata: {},
    usage: {
      input_tokens: completion.usage.prompt_tokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: completion.usage.completion_tokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: completion.usage.total_tokens,
    },
  };
}

/**
 * The response as the SSE events the SDKs assemble (`client.responses.stream`, the Agents SDK): created and
 * in_progress with an empty output, then each output item added, its text or arguments as one delta and done, the
 * item done, and `response.completed` (or `response.incomplete`) with the whole response.
 */
export function streamResponse(res: http.ServerResponse, response: Record<string, unknown>): void {
  const events: string[] = [];
  const send = (type: string, fields: Record<string, unknown>) =>
    events.push(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: events.length, ...fields })}\n\n`);
  const started = { ...response, status: "in_progress", output: [], usage: null, incomplete_details: null };
  send("response.created", { response: started });
  send("response.in_progress", { response: started });
  (response.output as OutputItem[]).forEach((item, outputIndex) => {
    const at = { item_id: item.id, output_index: outputIndex };
    if (item.type === "message") {
      const part = (item.content as Array<{ text: string; logprobs: unknown[] }>)[0]!;
      send("response.output_item.added", { output_index: outputIndex, item: { ...item, status: "in_progress", content: [] } });
      send("response.content_part.added", { ...at, content_index: 0, part: { type: "output_text", text: "", annotations: [], logprobs: [] } });
      send("response.output_text.delta", { ...at, content_index: 0, delta: part.text, logprobs: part.logprobs });
      send("response.output_text.done", { ...at, content_index: 0, text: part.text, logprobs: part.logprobs });
      send("response.content_part.done", { ...at, content_index: 0, part });
    } else if (item.type === "reasoning") {
      send("response.output_item.added", { output_index: outputIndex, item });
    } else {
      send("response.output_item.added", { output_index: outputIndex, item: { ...item, arguments: "", status: "in_progress" } });
      send("response.function_call_arguments.delta", { ...at, delta: item.arguments });
      send("response.function_call_arguments.done", { ...at, name: item.name, arguments: item.arguments });
    }
    send("response.output_item.done", { output_index: outputIndex, item });
  });
  send(response.status === "incomplete" ? "response.incomplete" : "response.completed", { response });
  sendEventStream(res, events);
}

/**
 * The responses of one trajectory that a later request may continue (`previous_response_id`), as OpenAI's stored
 * responses are continued: the continued response's conversation (its input and the earlier ones it continued,
 * without their instructions, and its output as the assistant message) comes before the new request's input, under
 * the new request's own instructions. Kept for the trajectory's life, so a chain never reaches another episode's
 * responses; a response asked for with `store: false` is not kept, as OpenAI keeps none.
 */
export class ResponseChain {
  private readonly conversations = new Map<string, readonly RequestMessage[]>();

  /**
   * The conversation `request` stands for, its instructions apart: the conversation of the response it continues, if
   * it names one (a 400 for an id this trajectory never answered), then its own input.
   */
  conversationOf(request: ResponsesRequest): RequestMessage[] {
    const input = inputMessagesOf(request);
    const id = request.previous_response_id;
    if (id === undefined || id === null) return input;
    const earlier = this.conversations.get(id);
    if (earlier === undefined) {
      throw new GatewayError(400, `Previous response with id '${id}' not found: this trajectory answered no such response, or it was asked for with store: false`, "previous_response_not_found", "previous_response_id");
    }
    return [...earlier, ...input];
  }

  /** Keeps the conversation of the response `completion` answered: `conversation` (conversationOf), then the reply. */
  remember(request: ResponsesRequest, conversation: readonly RequestMessage[], completion: Completion): void {
    if (request.store === false) return;
    const reply: RequestMessage = {
      role: "assistant",
      content: completion.content ?? "",
      ...(completion.reasoning !== undefined ? { reasoning_content: completion.reasoning } : {}),
      ...(completion.toolCalls.length > 0 ? { tool_calls: completion.toolCalls } : {}),
    };
    this.conversations.set(responseIdOf(completion), [...conversation, reply]);
  }
}
