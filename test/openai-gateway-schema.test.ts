/**
 * Chat-completion requests skip zod when they have the usual shape (src/gateway/openai-schema.ts,
 * usualChatCompletionRequest). That hand check must never accept what the schema refuses, and must hand over exactly
 * what the schema would: compared here on usual requests and on thousands of random mutations of them (wrong types,
 * missing and extra keys, empty lists, odd numbers). The usual requests must take the fast path, or it would be dead
 * code; and the gateway's errors stay the schema's, since everything the fast path declines goes to zod.
 */
import { describe, expect, it } from "vitest";
import { chatCompletionRequestSchema, GatewayError, parseChatCompletionRequest, responseFormatGrammar, usualChatCompletionRequest } from "../src/gateway/openai-schema.js";
import { generateBody } from "../src/engine/wire.js";
import { seededRandom } from "../src/data/random.js";
import { mutateOnePlace } from "./helpers/mutate.js";

const TOOL = {
  type: "function",
  function: { name: "calc", description: "a tool", parameters: { type: "object", properties: { answer: { type: "string" } }, required: ["answer"] } },
};

function usual(random: () => number): Record<string, unknown> {
  const pick = <T>(...values: T[]): T => values[Math.floor(random() * values.length)]!;
  const messages: Record<string, unknown>[] = [
    { role: pick("system", "developer"), content: "be brief" },
    { role: "user", content: pick("2+2?", [{ type: "text", text: "2+2?" }], [{ type: "text" }, { type: "image_url", image_url: { url: "x" } }]) },
  ];
  for (let turn = 0; turn < Math.floor(random() * 3); turn++) {
    const calls = [{ id: `call_${turn}`, type: "function", function: { name: "calc", arguments: '{"answer": "4"}' } }];
    messages.push({ role: "assistant", content: pick("thinking", null, ""), tool_calls: pick(calls, null, undefined, []), ...(random() < 0.3 ? { reasoning_content: pick("hm", null) } : {}) });
    messages.push({ role: pick("tool", "function"), tool_call_id: `call_${turn}`, content: "4", ...(random() < 0.3 ? { name: "calc" } : {}) });
  }
  messages.push({ role: "user", content: "go on", ...(random() < 0.2 ? { extra_key: 1 } : {}) });
  const body: Record<string, unknown> = { model: "policy", messages };
  const optional: Record<string, () => unknown> = {
    tools: () => pick([TOOL], [], null),
    tool_choice: () => pick("auto", "none", "required", { type: "function", function: { name: "calc" } }, null),
    stream: () => pick(true, false, null),
    stream_options: () => pick({ include_usage: true }, {}, null),
    max_tokens: () => pick(1, 512, null),
    max_completion_tokens: () => pick(64, null),
    stop: () => pick("\n", ["a", "b"], [], null),
    n: () => pick(1, 2, null),
    temperature: () => pick(0, 0.7, 1, null),
    top_p: () => pick(1, 0.9, null),
    logprobs: () => pick(false, true, null),
    response_format: () => pick({ type: "text" }, { type: "json_object" }, null),
    seed: () => pick(1, "x"),
    frequency_penalty: () => 0.5,
  };
  for (const [key, value] of Object.entries(optional)) if (random() < 0.5) body[key] = value();
  if (random() < 0.2) delete body.model;
  return body;
}

const ODD_VALUES: unknown[] = [undefined, null, 0, -1, 1.5, NaN, Infinity, 2 ** 60, "", "7", "auto", "function", "user", true, [], {}, [1, 2], ["a", "b", "c", "d", "e"], [{}], { type: "function" }, { name: "x" }];

const mutate = (value: Record<string, unknown>, random: () => number) => mutateOnePlace(value, random, ODD_VALUES);

describe("usual chat-completion requests without zod", () => {
  it("takes the fast path for the usual requests, with the schema's result", () => {
    const random = seededRandom(7);
    for (let i = 0; i < 500; i++) {
      const request = usual(random);
      const fast = usualChatCompletionRequest(request);
      expect(fast, JSON.stringify(request)).toBeDefined();
      const slow = chatCompletionRequestSchema.safeParse(request);
      expect(slow.success).toBe(true);
      expect(fast).toEqual(slow.data);
    }
  });

  it("never accepts what the schema refuses, and agrees with it on 10,000 mutated requests", () => {
    const random = seededRandom(11);
    let fastAccepted = 0;
    let refused = 0;
    for (let i = 0; i < 10_000; i++) {
      const request = mutate(usual(random), random);
      const slow = chatCompletionRequestSchema.safeParse(request);
      const fast = usualChatCompletionRequest(request);
      if (fast !== undefined) {
        fastAccepted += 1;
        expect(slow.success, JSON.stringify(request)).toBe(true);
        expect(fast).toEqual(slow.data);
      }
      if (!slow.success) refused += 1;
      // What the gateway calls gives the schema's verdict either way, and the schema's error when it refuses.
      const parsed = parseChatCompletionRequest(request);
      expect(parsed.success).toBe(slow.success);
      if (parsed.success && slow.success) expect(parsed.data).toEqual(slow.data);
      if (!parsed.success && !slow.success) expect(parsed.error.issues).toEqual(slow.error.issues);
    }
    // Both kinds occurred, so the comparison above exercised both sides.
    expect(fastAccepted).toBeGreaterThan(500);
    expect(refused).toBeGreaterThan(500);
  });
});

describe("response_format as a grammar", () => {
  const schema = { type: "object", properties: { answer: { type: "string" } }, required: ["answer"], additionalProperties: false };

  it("json_schema is its schema as JSON text, json_object any object, text and none no grammar", () => {
    expect(JSON.parse(responseFormatGrammar({ type: "json_schema", json_schema: { name: "answer", schema, strict: true } })!)).toEqual(schema);
    expect(JSON.parse(responseFormatGrammar({ type: "json_object" })!)).toEqual({ type: "object" });
    expect(responseFormatGrammar({ type: "text" })).toBeUndefined();
    expect(responseFormatGrammar(undefined)).toBeUndefined();
    expect(responseFormatGrammar(null)).toBeUndefined();
  });

  it("a json_schema without a schema object, or another type, is a 400 naming the field", () => {
    const refusal = (format: unknown) => {
      try {
        responseFormatGrammar(format);
      } catch (err) {
        const { status, code, param } = err as GatewayError;
        return { status, code, param };
      }
      return undefined;
    };
    expect(refusal({ type: "json_schema", json_schema: { name: "x" } })).toEqual({ status: 400, code: "invalid_request", param: "response_format.json_schema.schema" });
    expect(refusal({ type: "json_schema", json_schema: { name: "x", schema: "{}" } })).toEqual({ status: 400, code: "invalid_request", param: "response_format.json_schema.schema" });
    expect(refusal({ type: "json_schema" })).toEqual({ status: 400, code: "invalid_request", param: "response_format.json_schema.schema" });
    expect(refusal({ type: "regex" })).toEqual({ status: 400, code: "unsupported_parameter", param: "response_format" });
  });

  it("goes to SGLang as sampling_params.json_schema", () => {
    const body = JSON.parse(generateBody({ inputIds: [1, 2], samplingParams: { maxNewTokens: 8, jsonSchema: '{"type":"object"}' } }, { rid: "rid-1" }));
    expect(body.sampling_params).toMatchObject({ max_new_tokens: 8, json_schema: '{"type":"object"}' });
    expect(JSON.parse(generateBody({ inputIds: [1, 2], samplingParams: { maxNewTokens: 8 } }, { rid: "rid-2" })).sampling_params).not.toHaveProperty("json_schema");
  });
});
