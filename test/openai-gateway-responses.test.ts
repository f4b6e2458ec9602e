/**
 * The Responses API's mapping onto the gateway's chat session (src/gateway/responses-api.ts): which chat messages
 * and tools a request stands for, and the response and SSE events a turn comes back as. The SDKs end to end (npm and
 * Python, streaming and not, token for token against tool_agent) are test/openai-gateway.test.ts; the refusals over
 * HTTP, test/openai-gateway-faults.test.ts.
 */
import type http from "node:http";
import { describe, expect, it } from "vitest";
import { chatRequestOf, ignoredResponsesFields, parseResponsesRequest, ResponseChain, responseOf, streamResponse } from "../src/gateway/responses-api.js";
import { GatewayError } from "../src/gateway/openai-schema.js";
import { messageKey, splitReasoning } from "../src/gateway/history.js";
import type { Completion } from "../src/gateway/session.js";

const chatOf = (body: Record<string, unknown>) => chatRequestOf(parseResponsesRequest(body));
const refusal = (body: Record<string, unknown>) => {
  try {
    chatOf(body);
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    const { status, code, param } = err as GatewayError;
    return { status, code, param };
  }
  throw new Error("expected a refusal");
};

const TOOL = { type: "function", name: "calc", description: "checks", parameters: { type: "object", properties: {} }, strict: true };

describe("a request as the chat request it stands for", () => {
  it("instructions become the system message, a string input the user message", () => {
    expect(chatOf({ model: "m", instructions: "Be brief.", input: "2+2?" }).messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "2+2?" },
    ]);
  });

  it("a function_call joins the assistant message before it; one after a tool result opens a new turn", () => {
    const request = chatOf({
      input: [
        { role: "user", content: [{ type: "input_text", text: "What is " }, { type: "input_text", text: "2+2?" }] },
        { type: "message", id: "msg_0", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Checking.", annotations: [] }] },
        { type: "function_call", id: "fc_1", call_id: "call_0_0", name: "calc", arguments: '{"answer": "4"}', status: "completed" },
        { type: "function_call", call_id: "call_0_1", name: "calc", arguments: "{}" },
        { type: "function_call_output", call_id: "call_0_0", output: "ok" },
        { type: "function_call_output", call_id: "call_0_1", output: [{ type: "input_text", text: "also ok" }] },
        { type: "reasoning", id: "rs_1", summary: [] },
        { type: "function_call", call_id: "call_1_0", name: "calc", arguments: "{}" },
        { type: "function_call_output", call_id: "call_1_0", output: "done" },
      ],
    });
    expect(request.messages).toEqual([
      { role: "user", content: "What is 2+2?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [
          { id: "call_0_0", type: "function", function: { name: "calc", arguments: '{"answer": "4"}' } },
          { id: "call_0_1", type: "function", function: { name: "calc", arguments: "{}" } },
        ],
      },
      { role: "tool", tool_call_id: "call_0_0", content: "ok" },
      { role: "tool", tool_call_id: "call_0_1", content: "also ok" },
      { role: "assistant", content: "", tool_calls: [{ id: "call_1_0", type: "function", function: { name: "calc", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "call_1_0", content: "done" },
    ]);
  });

  it("function tools become chat tools without `strict`; tool_choice, max_output_tokens and sampling carry over", () => {
    const request = chatOf({ input: "hi", tools: [TOOL], tool_choice: { type: "function", name: "calc" }, max_output_tokens: 64, temperature: 0.5, top_p: 0.9 });
    expect(request.tools).toEqual([{ type: "function", function: { name: "calc", description: "checks", parameters: { type: "object", properties: {} } } }]);
    expect(Object.keys(request.tools![0]!.function)).toEqual(["name", "description", "parameters"]);
    expect(request.tool_choice).toEqual({ type: "function", function: { name: "calc" } });
    expect(request).toMatchObject({ max_completion_tokens: 64, temperature: 0.5, top_p: 0.9 });
    expect(chatOf({ input: "hi", tools: [TOOL], tool_choice: "required" }).tool_choice).toBe("required");
  });

  it("text.format becomes response_format: json_schema's name, schema and strict nested under json_schema", () => {
    const schema = { type: "object", properties: { answer: { type: "string" } }, required: ["answer"] };
    expect(chatOf({ input: "hi", text: { format: { type: "json_schema", name: "answer", schema, strict: true } } }).response_format).toEqual({
      type: "json_schema",
      json_schema: { name: "answer", schema, strict: true },
    });
    expect(chatOf({ input: "hi", text: { format: { type: "json_object" } } }).response_format).toEqual({ type: "json_object" });
    expect(chatOf({ input: "hi", text: { format: { type: "text" } } })).not.toHaveProperty("response_format");
    expect(chatOf({ input: "hi" })).not.toHaveProperty("response_format");
  });

  it("refuses what needs state, hosted tools, other parts or formats, naming the field", () => {
    expect(refusal({ input: "hi", conversation: "conv_1" })).toEqual({ status: 400, code: "unsupported_parameter", param: "conversation" });
    expect(refusal({ input: "hi", background: true })).toEqual({ status: 400, code: "unsupported_parameter", param: "background" });
    expect(refusal({ input: "hi", tools: [{ type: "file_search" }] })).toEqual({ status: 400, code: "unsupported_parameter", param: "tools.0.type" });
    expect(refusal({ input: "hi", tools: [{ type: "function" }] })).toEqual({ status: 400, code: "invalid_request", param: "tools.0.name" });
    expect(refusal({ input: "hi", tool_choice: { type: "web_search" } })).toEqual({ status: 400, code: "unsupported_parameter", param: "tool_choice" });
    expect(refusal({ input: [{ role: "user", content: [{ type: "input_file", file_id: "f" }] }] })).toEqual({ status: 400, code: "unsupported_parameter", param: "input.0.content.0.type" });
    expect(refusal({ input: "hi", text: { format: { type: "grammar" } } })).toEqual({ status: 400, code: "unsupported_parameter", param: "text.format" });
    expect(refusal({ input: [{ type: "reasoning", summary: [] }] })).toEqual({ status: 400, code: "invalid_request", param: "input" });
    expect(refusal({ input: [{ role: "user", content: 3 }] })).toMatchObject({ status: 400, code: "invalid_request" });
    expect(refusal({ input: [] })).toEqual({ status: 400, code: "invalid_request", param: "input" });
  });

  it("notes the fields it does not act on, not the ones every SDK sends", () => {
    expect(ignoredResponsesFields({ model: "m", input: "hi", store: false, include: [], parallel_tool_calls: true, reasoning: { effort: "low" }, truncation: "auto", previous_response_id: null })).toEqual(["reasoning", "truncation"]);
  });
});

const completion = (over: Partial<Completion> = {}): Completion => ({
  id: "chatcmpl-agentrl-abcd-3",
  content: "Checking.",
  toolCalls: [{ id: "call_2_0", type: "function", function: { name: "calc", arguments: '{"answer":"4"}' } }],
  finishReason: "tool_calls",
  usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  ...over,
});

describe("previous_response_id: a request continuing one of its trajectory's responses", () => {
  const turn = (id: string, content: string | null, calls: Completion["toolCalls"] = []): Completion => ({
    id,
    content,
    toolCalls: calls,
    finishReason: calls.length > 0 ? "tool_calls" : "stop",
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
  const CALL = { id: "call_0_0", type: "function" as const, function: { name: "calc", arguments: '{"answer": "4"}' } };

  it("puts the continued conversation (its input, its reply) between the new instructions and the new input", () => {
    const chain = new ResponseChain();
    const first = parseResponsesRequest({ instructions: "Be brief.", input: "2+2?", tools: [TOOL] });
    chain.remember(first, chain.conversationOf(first), turn("chatcmpl-k-1", "Checking.", [CALL]));
    const second = parseResponsesRequest({ previous_response_id: "resp_k-1", instructions: "Be briefer.", input: [{ type: "function_call_output", call_id: "call_0_0", output: "ok" }] });
    const conversation = chain.conversationOf(second);
    expect(chatRequestOf(second, conversation).messages).toEqual([
      { role: "system", content: "Be briefer." },
      { role: "user", content: "2+2?" },
      { role: "assistant", content: "Checking.", tool_calls: [CALL] },
      { role: "tool", tool_call_id: "call_0_0", content: "ok" },
    ]);
    // A chain of three: the third request sees both earlier turns, and the reply's key is the turn's as sent back.
    chain.remember(second, conversation, { ...turn("chatcmpl-k-2", "#### 4"), reasoning: "It is 4." });
    const third = parseResponsesRequest({ previous_response_id: "resp_k-2", input: "Sure?" });
    const messages = chatRequestOf(third, chain.conversationOf(third)).messages;
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant", "user"]);
    expect(messageKey(messages[3]!)).toBe(messageKey({ role: "assistant", content: "#### 4" }));
  });

  it("an id this trajectory never answered, or answered with store false, is a 400 naming previous_response_id", () => {
    const chain = new ResponseChain();
    const unknown = () => chain.conversationOf(parseResponsesRequest({ previous_response_id: "resp_k-1", input: "hi" }));
    expect(unknown).toThrow(/Previous response with id 'resp_k-1' not found/);
    expect(unknown).toThrow(expect.objectContaining({ status: 400, code: "previous_response_not_found", param: "previous_response_id" }));
    const unstored = parseResponsesRequest({ input: "hi", store: false });
    chain.remember(unstored, chain.conversationOf(unstored), turn("chatcmpl-k-1", "hello"));
    expect(unknown).toThrow(/not found/);
    expect(chain.conversationOf(parseResponsesRequest({ input: "hi", previous_response_id: null }))).toEqual([{ role: "user", content: "hi" }]);
  });

  it("the response names the response it continued and whether it is kept", () => {
    const request = parseResponsesRequest({ previous_response_id: "resp_k-1", input: "hi", store: false });
    expect(responseOf(turn("chatcmpl-k-2", "hello"), request, "policy", 0)).toMatchObject({ id: "resp_k-2", previous_response_id: "resp_k-1", store: false });
    expect(responseOf(turn("chatcmpl-k-1", "hello"), parseResponsesRequest({ input: "hi" }), "policy", 0)).toMatchObject({ previous_response_id: null, store: true });
  });
});

describe("a turn as a response", () => {
  const request = parseResponsesRequest({ input: "hi", tools: [TOOL], instructions: "Be brief." });

  it("the text as a message item, each call as a function_call item, usage in the Responses API's names", () => {
    const response = responseOf(completion(), request, "policy", 7);
    expect(response).toMatchObject({ id: "resp_agentrl-abcd-3", object: "response", created_at: 7, status: "completed", incomplete_details: null, model: "policy", instructions: "Be brief." });
    expect(response.output).toEqual([
      { type: "message", id: "msg_3", status: "completed", role: "assistant", content: [{ type: "output_text", text: "Checking.", annotations: [], logprobs: [] }] },
      { type: "function_call", id: "fc_call_2_0", call_id: "call_2_0", name: "calc", arguments: '{"answer":"4"}', status: "completed" },
    ]);
    expect(response.usage).toEqual({ input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 });
  });

  it("a think block is a reasoning item before the message; its key is the answer's, with or without it", () => {
    const response = responseOf(completion({ reasoning: "I add.", toolCalls: [] }), request, "policy", 7);
    expect((response.output as Array<Record<string, unknown>>)[0]).toEqual({ type: "reasoning", id: "rs_3", summary: [], content: [{ type: "reasoning_text", text: "I add." }] });
    expect(splitReasoning("<think>\nI add.\n</think>\n\n#### 4")).toEqual({ reasoning: "I add.", answer: "#### 4" });
    expect(splitReasoning("I add.</think>#### 4")).toEqual({ reasoning: "I add.", answer: "#### 4" });
    expect(splitReasoning("#### 4")).toEqual({ answer: "#### 4" });
    const key = (content: string) => messageKey({ role: "assistant", content });
    expect(key("<think>x</think>\n\n#### 4")).toBe(key("#### 4"));
    expect(key("#### 4")).not.toBe(key("#### 5"));
    expect(messageKey({ role: "user", content: "<think>x</think>hi" })).not.toBe(messageKey({ role: "user", content: "hi" }));
  });

  it("a turn cut by its length is incomplete (max_output_tokens); calls alone have no message item", () => {
    expect(responseOf(completion({ finishReason: "length", toolCalls: [] }), request, "policy", 7)).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" } });
    expect((responseOf(completion({ content: "" }), request, "policy", 7).output as Array<{ type: string }>).map((item) => item.type)).toEqual(["function_call"]);
  });

  it("streams created, the items' events in order with rising sequence numbers, then completed with the whole response", () => {
    // The turn is sampled before its reply starts: the events go out as one body, with its length, in one write.
    const writes: string[] = [];
    let headers: Record<string, unknown> = {};
    const res = {
      writeHead: (_status: number, sent: Record<string, unknown>) => ((headers = sent), res),
      write: (chunk: string) => writes.push(chunk),
      end: (chunk: string) => writes.push(chunk),
    } as unknown as http.ServerResponse;
    const response = responseOf(completion(), request, "policy", 7);
    streamResponse(res, response);
    expect(writes).toHaveLength(1);
    expect(headers).toMatchObject({ "content-type": "text/event-stream; charset=utf-8", "content-length": Buffer.byteLength(writes[0]!) });
    const events = writes[0]!.split(/(?<=\n\n)/).map((chunk) => {
      const [, type, data] = /^event: (\S+)\ndata: (.*)\n\n$/s.exec(chunk)!;
      const parsed = JSON.parse(data!) as Record<string, unknown>;
      expect(parsed.type).toBe(type);
      return parsed;
    });
    expect(events.map((e) => e.type)).toEqual([
      "response.created", "response.in_progress",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events[0]!.response).toMatchObject({ status: "in_progress", output: [] });
    expect(events[4]).toMatchObject({ item_id: "msg_3", output_index: 0, delta: "Checking." });
    expect(events[9]).toMatchObject({ item_id: "fc_call_2_0", output_index: 1, delta: '{"answer":"4"}' });
    expect(events.at(-1)!.response).toEqual(response);
  });
});
