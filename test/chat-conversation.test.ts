/**
 * The token-in/token-out conversation record (issue 3 §2). A fake engine "samples" exactly the tokens the template
 * would render for each assistant message (taken from Python transformers' full render in expected.json), so the
 * accumulated record must equal that full render token for token, with mask 1 exactly on the sampled spans.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import fc from "fast-check";
import { Conversation, loadChatModel, type ChatMessage, type ChatModel } from "../src/chat/index.js";
import { getParser } from "../src/parsers/index.js";
import type { TokenVocab } from "../src/parsers/types.js";
import { FIXTURES_DIR, QWEN3_DIR, materializeFixtureModel } from "./fixtures/templates/materialize.js";
import { compareTokens, equalFrom } from "../src/chat/drift.js";
import { tempDir } from "./helpers/tmp.js";

const spec = JSON.parse(readFileSync(path.join(FIXTURES_DIR, "conversations.json"), "utf8")) as {
  tools: Record<string, unknown>[];
  conversations: Record<string, ChatMessage[]>;
};
const expected = JSON.parse(readFileSync(path.join(FIXTURES_DIR, "expected.json"), "utf8")) as Record<
  string,
  Record<string, { full: { text: string; ids: number[] } }>
>;

const temp = tempDir("chat-conv");
const models: Record<string, ChatModel> = {};
const MODEL_NAMES = ["qwen3", "qwen25-style", "llama3-style"] as const;

beforeAll(async () => {
  models.qwen3 = await loadChatModel(QWEN3_DIR);
  models["qwen25-style"] = await loadChatModel(materializeFixtureModel("qwen25-style", temp));
  models["llama3-style"] = await loadChatModel(materializeFixtureModel("llama3-style", temp));
});

/** A fake engine that samples the next assistant message of `full`: tokens up to and including the end-of-turn. */
function sampleFrom(full: readonly number[], from: number, model: ChatModel): number[] {
  const end = full.indexOf(model.endOfTurnTokenId, from);
  expect(end).toBeGreaterThanOrEqual(from);
  return full.slice(from, end + 1);
}

describe.each(MODEL_NAMES)("%s: system, user, assistant tool call, two tool results, answer", (name) => {
  it("accumulates exactly the full template render, mask 1 exactly on sampled spans", () => {
    const model = models[name]!;
    const [system, user, callTurn, result1, result2, answer] = spec.conversations.tool_turn!;
    const full = expected[name]!.tool_turn!.full.ids;
    const conversation = Conversation.start(model, [system!, user!], { tools: spec.tools });
    const sampledPositions = new Set<number>();
    const logprobAt = new Map<number, number>();

    const sample = (info: Parameters<Conversation["appendSampled"]>[2]) => {
      const start = conversation.totalLength;
      expect(full.slice(0, start)).toEqual([...conversation.tokenIds]); // a prefix of the full render so far
      const ids = sampleFrom(full, start, model);
      const logprobs = ids.map((_, i) => -0.01 * (i + 1) - start);
      conversation.appendSampled(ids, logprobs, info);
      ids.forEach((_, i) => {
        sampledPositions.add(start + i);
        logprobAt.set(start + i, logprobs[i]!);
      });
      expect(conversation.lossMask[conversation.totalLength - 1]).toBe(1); // the end-of-turn token is trained on
    };

    sample({ content: "", toolCalls: callTurn!.tool_calls });
    const appended = conversation.appendEnvironment([result1!, result2!]);
    expect(appended.appended).toBe(true);
    sample({});

    // The record is the full render without what the template writes after the final end-of-turn token.
    const bridge = model.encode(model.bridgeText);
    expect([...conversation.tokenIds, ...bridge]).toEqual(full);
    conversation.tokenIds.forEach((_, pos) => {
      expect(conversation.lossMask[pos]).toBe(sampledPositions.has(pos) ? 1 : 0);
      expect(conversation.tokenLogprobs[pos]).toBe(logprobAt.get(pos) ?? 0);
    });
    const report = conversation.driftCheck();
    expect(report).toEqual(compareTokens(model, conversation.tokenIds, full.slice(0, full.length - bridge.length), "strict"));
    expect(report).toMatchObject({ status: "match", accumulatedLength: conversation.totalLength, renderedLength: conversation.totalLength });
    expect(conversation.driftMetrics).toEqual({ checks: 1, mismatches: 0 });
    expect(conversation.lastAssistantText()).toContain("#### 72");

    const exported = conversation.export();
    expect([...exported.promptIds, ...exported.responseIds]).toEqual([...conversation.tokenIds]);
    expect(exported.responseMask).toHaveLength(exported.responseIds.length);
    expect(exported.responseLogprobs).toHaveLength(exported.responseIds.length);
    expect(exported.segments.map((s) => [s.kind, s.turn])).toEqual([
      ["assistant", 0],
      ["tool", 1],
      ["assistant", 1],
    ]);
    expect(exported.segments[0]!.start).toBe(0);
    expect(exported.segments[2]!.end).toBe(exported.responseIds.length);
    expect(exported.segments[1]!.text).toContain("24");
    // The bridge after the end-of-turn token opens the tool segment, with mask 0 (verl PR #6921).
    const toolSegment = exported.segments[1]!;
    expect(model.decode(exported.responseIds.slice(toolSegment.start, toolSegment.start + bridge.length))).toBe(model.bridgeText);
    expect(exported.responseMask.slice(toolSegment.start, toolSegment.end).every((m) => m === 0)).toBe(true);
  });
});

describe("the plain chat conversation (user turns in between)", () => {
  it.each(["qwen25-style", "llama3-style"] as const)("%s: record equals the full render", (name) => {
    const model = models[name]!;
    const [user1, reply1, user2] = spec.conversations.chat!;
    const full = expected[name]!.chat!.full.ids;
    const conversation = Conversation.start(model, [user1!], { tools: spec.tools });
    conversation.appendSampled(sampleFrom(full, conversation.totalLength, model));
    expect(conversation.messages[1]!.content).toBe(reply1!.content);
    conversation.appendEnvironment([user2!]);
    conversation.appendSampled(sampleFrom(full, conversation.totalLength, model));
    expect([...conversation.tokenIds, ...model.encode(model.bridgeText)]).toEqual(full);
    expect(conversation.segments.map((s) => s.kind)).toEqual(["prompt", "assistant", "user", "assistant"]);
    expect(conversation.driftCheck().status).toBe("match");
  });
});

describe("Qwen3 with <think>: the template drops past reasoning", () => {
  it("the drift check reports the drift and the token record stays what the engine saw", () => {
    const model = models.qwen3!;
    const warnings: string[] = [];
    const conversation = Conversation.start(model, [{ role: "user", content: "What is 6*7?" }], {
      warn: (message) => warnings.push(message),
    });
    const prompt = [...conversation.tokenIds];
    const turn1 = [...model.encode("<think>\nSix sevens are 42.\n</think>\n\n42"), model.endOfTurnTokenId];
    conversation.appendSampled(turn1, turn1.map(() => -0.5));
    expect(conversation.driftCheck().status).toBe("match"); // the reasoning is kept while it is the latest turn

    const followUp: ChatMessage = { role: "user", content: "And 6*8?" };
    const delta = conversation.previewEnvironment([followUp]);
    conversation.appendEnvironment([followUp]);
    const turn2 = [...model.encode("<think>\n42 + 6\n</think>\n\n48"), model.endOfTurnTokenId];
    conversation.appendSampled(turn2, turn2.map(() => -0.25));

    // Exactly what the engine saw: prompt, sampled turn, bridge + user turn + generation prompt, sampled turn.
    expect([...conversation.tokenIds]).toEqual([...prompt, ...turn1, ...delta, ...turn2]);
    expect(model.decode(delta)).toBe("\n<|im_start|>user\nAnd 6*8?<|im_end|>\n<|im_start|>assistant\n");
    expect([...conversation.lossMask]).toEqual([
      ...prompt.map(() => 0),
      ...turn1.map(() => 1),
      ...delta.map(() => 0),
      ...turn2.map(() => 1),
    ]);
    expect(model.decode([...conversation.tokenIds])).toContain("Six sevens are 42.");

    // The re-render drops turn 1's reasoning: a difference, reported as reasoning_only rather than drift.
    const report = conversation.driftCheck();
    expect(report.status).toBe("reasoning_only");
    expect(report.firstDifference).toBe(prompt.length); // the first sampled token: "<think>" of turn 1
    expect(report.accumulatedExcerpt).toContain("<think>");
    expect(report.renderedExcerpt).not.toContain("Six sevens");
    expect(conversation.driftMetrics).toEqual({ checks: 2, mismatches: 0 });
    expect(warnings).toHaveLength(0);
    // The check never rewrites the record.
    expect([...conversation.tokenIds]).toEqual([...prompt, ...turn1, ...delta, ...turn2]);
  });
});

describe("with the function-call parsers", () => {
  it("a ChatModel is the parsers' TokenVocab: calls parsed from the last sampled turn feed the drift check", () => {
    const model = models.qwen3!;
    const vocab: TokenVocab = model;
    const conversation = Conversation.start(model, [{ role: "user", content: "Add 2 and 3." }], { tools: spec.tools });
    const sampled = [
      ...model.encode(
        '<think>\nUse the tool.\n</think>\n\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+3"}}\n</tool_call>',
      ),
      model.endOfTurnTokenId,
    ];
    conversation.appendSampled(sampled, sampled.map(() => -0.1));
    const parsed = getParser("qwen25").parseTokens(conversation.lastAssistantIds(), vocab, { tools: ["calculator"] });
    expect(parsed.errors).toEqual([]);
    expect(parsed.calls.map((call) => [call.name, call.arguments])).toEqual([["calculator", { expression: "2+3" }]]);
    conversation.recordToolCalls(
      parsed.calls.map((call) => ({ type: "function", function: { name: call.name, arguments: call.arguments } })),
      "<think>\nUse the tool.\n</think>\n\n",
    );
    conversation.appendEnvironment([{ role: "tool", content: "5" }]);
    expect(conversation.driftCheck().status).toBe("match");
  });
});

describe("a template that refuses several tool calls in one message (as Llama 3.1 does)", () => {
  it("the delta for two tool results still comes out, equal to the full render", async () => {
    const dir = materializeFixtureModel("llama3-style", temp);
    const configFile = path.join(dir, "tokenizer_config.json");
    const config = JSON.parse(readFileSync(configFile, "utf8")) as { chat_template: string };
    const branch = "{%- if message.role == 'assistant' and message.tool_calls %}";
    expect(config.chat_template).toContain(branch);
    config.chat_template = config.chat_template.replace(
      branch,
      `${branch}{%- if message.tool_calls | length != 1 %}{{- raise_exception('single tool-calls only') }}{%- endif %}`,
    );
    writeFileSync(configFile, JSON.stringify(config));
    const model = await loadChatModel(dir);
    const call = { id: "c1", type: "function", function: { name: "calculator", arguments: { expression: "1+1" } } };
    const results: ChatMessage[] = [
      { role: "tool", tool_call_id: "c1", name: "calculator", content: "2" },
      { role: "tool", tool_call_id: "c2", name: "calculator", content: "also 2" },
    ];
    const messages: ChatMessage[] = [
      { role: "user", content: "1+1?" },
      { role: "assistant", content: "", tool_calls: [call] },
      ...results,
      { role: "assistant", content: "2" },
    ];
    expect(() => model.render([messages[0]!, { role: "assistant", tool_calls: [call, call] }])).toThrow(/single/);
    const full = model.encode(model.render(messages, { tools: spec.tools }));
    const conversation = Conversation.start(model, messages.slice(0, 1), { tools: spec.tools });
    conversation.appendSampled(sampleFrom(full, conversation.totalLength, model), undefined, { toolCalls: [call] });
    conversation.appendEnvironment(results);
    conversation.appendSampled(sampleFrom(full, conversation.totalLength, model));
    expect([...conversation.tokenIds]).toEqual(full);
    expect(conversation.driftCheck().status).toBe("match");
  });
});

describe("edges of the record", () => {
  it("a turn cut short gets the end-of-turn token with mask 0 before the next message", () => {
    const model = models["qwen25-style"]!;
    const conversation = Conversation.start(model, [{ role: "user", content: "Count." }]);
    const cut = model.encode("one two thr");
    conversation.appendSampled(cut, cut.map(() => -1));
    const before = conversation.totalLength;
    conversation.appendEnvironment([{ role: "user", content: "Go on." }]);
    expect(conversation.tokenIds[before]).toBe(model.endOfTurnTokenId);
    expect(conversation.lossMask[before]).toBe(0);
    expect(conversation.driftCheck().status).toBe("match");
  });

  it("consecutive appendSampled calls extend one assistant turn", () => {
    const model = models["qwen25-style"]!;
    const conversation = Conversation.start(model, [{ role: "user", content: "Hi" }]);
    const ids = [...model.encode("Hello there, friend"), model.endOfTurnTokenId];
    conversation.appendSampled(ids.slice(0, 2), [-1, -2]);
    conversation.appendSampled(ids.slice(2), ids.slice(2).map(() => -3));
    expect(conversation.assistantTurns).toBe(1);
    expect(conversation.lastAssistantText()).toBe("Hello there, friend");
    expect([...conversation.lossMask].filter((m) => m === 1)).toHaveLength(ids.length);
    expect(conversation.export().segments).toHaveLength(1);
    expect(conversation.driftCheck().status).toBe("match");
  });

  it("a delta that would not fit is not appended and says so", () => {
    const model = models["qwen25-style"]!;
    const conversation = Conversation.start(model, [{ role: "user", content: "Hi" }]);
    conversation.appendSampled([...model.encode("Hello"), model.endOfTurnTokenId]);
    const length = conversation.totalLength;
    const result = conversation.appendEnvironment([{ role: "tool", content: "x".repeat(50) }], { maxResponseLength: 10 });
    expect(result).toMatchObject({ appended: false, reason: "response_length" });
    expect(conversation.totalLength).toBe(length);
    expect(conversation.awaitingSample).toBe(false);
  });

  it("Llama-3-style trims assistant content: strict reports drift, ignore_strippable tolerates it", () => {
    const model = models["llama3-style"]!;
    const conversation = Conversation.start(model, [{ role: "user", content: "Hi" }]);
    conversation.appendSampled([...model.encode("Bonjour !  "), model.endOfTurnTokenId]);
    conversation.appendEnvironment([{ role: "user", content: "Merci" }]);
    expect(conversation.driftCheck("strict").status).toBe("drift");
    expect(conversation.driftCheck("ignore_strippable").status).toBe("whitespace_only");
    expect(conversation.driftCheck("off").status).toBe("skipped");
    expect(conversation.driftMetrics).toEqual({ checks: 2, mismatches: 1 });
  });

  it("misuse is refused: environment before any sample, logprobs of the wrong length, ids outside the vocabulary", () => {
    const model = models["qwen25-style"]!;
    const conversation = Conversation.start(model, [{ role: "user", content: "Hi" }]);
    expect(() => conversation.appendEnvironment([{ role: "user", content: "again" }])).toThrow(/sampled assistant turn/);
    expect(() => conversation.appendSampled([1, 2], [-1])).toThrow(/2 sampled tokens but 1 logprobs/);
    expect(() => conversation.appendSampled([model.vocabSize])).toThrow(/not an id/);
  });
});

describe("property: random conversations keep the record consistent", () => {
  const ordinaryToken = fc.integer({ min: 0, max: 151_000 });
  const turn = fc.record({
    sampled: fc.array(ordinaryToken, { maxLength: 12 }),
    closed: fc.boolean(),
    environment: fc.oneof(
      fc.array(fc.string({ maxLength: 20 }).map((content) => ({ role: "tool", content })), { minLength: 1, maxLength: 3 }),
      fc.string({ maxLength: 20 }).map((content) => [{ role: "user", content }]),
    ),
  });

  it.each(MODEL_NAMES)("%s: equal lengths, mask 1 only on sampled tokens, appended tokens never change", (name) => {
    const model = models[name]!;
    fc.assert(
      fc.property(fc.string({ maxLength: 30 }), fc.array(turn, { minLength: 1, maxLength: 4 }), (question, turns) => {
        const conversation = Conversation.start(model, [{ role: "user", content: question }]);
        const expectedMask: number[] = [...conversation.tokenIds].map(() => 0);
        const expectedLogprobs: number[] = [...conversation.tokenIds].map(() => 0);
        for (const [k, t] of turns.entries()) {
          const ids = t.closed ? [...t.sampled, model.endOfTurnTokenId] : t.sampled;
          const logprobs = ids.map((_, i) => -(i + 1) / 7);
          const before = [...conversation.tokenIds];
          conversation.appendSampled(ids, logprobs);
          expectedMask.push(...ids.map(() => 1));
          expectedLogprobs.push(...logprobs);
          if (k < turns.length - 1) {
            const result = conversation.appendEnvironment(t.environment as ChatMessage[]);
            if (result.appended) {
              expectedMask.push(...Array.from({ length: result.tokens }, () => 0));
              expectedLogprobs.push(...Array.from({ length: result.tokens }, () => 0));
            }
          }
          expect([...conversation.tokenIds.slice(0, before.length)]).toEqual(before);
          // What each request prints: the record's ids, printed as they were appended.
          expect(Buffer.from(conversation.tokenIdsText).toString("latin1")).toBe([...conversation.tokenIds].join(","));
        }
        const n = conversation.totalLength;
        expect(conversation.lossMask).toHaveLength(n);
        expect(conversation.tokenLogprobs).toHaveLength(n);
        expect([...conversation.lossMask]).toEqual(expectedMask);
        expect([...conversation.tokenLogprobs]).toEqual(expectedLogprobs);
        const exported = conversation.export();
        expect(exported.responseIds).toHaveLength(conversation.responseLength);
        expect(exported.responseMask).toHaveLength(conversation.responseLength);
        expect(exported.responseLogprobs).toHaveLength(conversation.responseLength);
        let cursor = 0;
        for (const segment of exported.segments) {
          expect(segment.start).toBe(cursor);
          const maskHere = exported.responseMask.slice(segment.start, segment.end);
          expect(maskHere.every((m) => m === (segment.kind === "assistant" ? 1 : 0))).toBe(true);
          cursor = segment.end;
        }
        expect(cursor).toBe(exported.responseIds.length);
        expect(exported.assistantTurns).toBe(turns.length);
      }),
      { numRuns: 40 },
    );
  });
});

describe("property: a model that samples what its template renders leaves no drift", () => {
  const words = fc
    .array(fc.constantFrom("the", "clips", "42", "字节", "🧮", "Natalia", "sold", "+", "=", "é", "\"quoted\"", "a\nb"), {
      minLength: 1,
      maxLength: 8,
    })
    .map((parts) => parts.join(" "));
  const exchange = fc.oneof(
    fc.record({
      kind: fc.constant("call" as const),
      expressions: fc.array(words, { minLength: 1, maxLength: 3 }),
      results: fc.array(words, { minLength: 3, maxLength: 3 }),
    }),
    fc.record({ kind: fc.constant("chat" as const), answer: words, next: words }),
  );

  it.each(MODEL_NAMES)("%s: the record equals the full render and the drift check matches", (name) => {
    const model = models[name]!;
    fc.assert(
      fc.property(
        fc.option(words, { nil: undefined }),
        words,
        fc.array(exchange, { minLength: 1, maxLength: 3 }),
        words,
        (system, question, exchanges, finalAnswer) => {
          // The whole conversation as messages, and what the fake engine samples for each assistant message.
          const messages: ChatMessage[] = [
            ...(system ? [{ role: "system", content: system }] : []),
            { role: "user", content: question },
          ];
          const promptCount = messages.length;
          const steps: Array<{ toolCalls?: ChatMessage["tool_calls"]; environment?: ChatMessage[] }> = [];
          for (const [k, step] of exchanges.entries()) {
            if (step.kind === "call") {
              const toolCalls = step.expressions.map((expression, i) => ({
                id: `call_${k}_${i}`,
                type: "function",
                function: { name: "calculator", arguments: { expression } },
              }));
              const results = step.expressions.map((_, i) => ({
                role: "tool",
                tool_call_id: `call_${k}_${i}`,
                name: "calculator",
                content: step.results[i]!,
              }));
              messages.push({ role: "assistant", content: "", tool_calls: toolCalls }, ...results);
              steps.push({ toolCalls, environment: results });
            } else {
              messages.push({ role: "assistant", content: step.answer }, { role: "user", content: step.next });
              steps.push({ environment: [{ role: "user", content: step.next }] });
            }
          }
          messages.push({ role: "assistant", content: finalAnswer });
          steps.push({});
          const full = model.encode(model.render(messages, { tools: spec.tools }));

          const conversation = Conversation.start(model, messages.slice(0, promptCount), { tools: spec.tools });
          for (const step of steps) {
            expect(full.slice(0, conversation.totalLength)).toEqual([...conversation.tokenIds]);
            const info = step.toolCalls ? { content: "", toolCalls: step.toolCalls } : {};
            conversation.appendSampled(sampleFrom(full, conversation.totalLength, model), undefined, info);
            if (step.environment) conversation.appendEnvironment(step.environment);
          }
          expect([...conversation.tokenIds, ...model.encode(model.bridgeText)]).toEqual(full);
          expect(conversation.driftCheck().status).toBe("match");
        },
      ),
      { numRuns: 25 },
    );
  });
});


describe("compareTokens classification", () => {
  it("calls a difference made only of reasoning blocks reasoning_only, and anything more drift", () => {
    const model = models.qwen3!;
    const withThink = model.encode("<|im_start|>assistant\n<think>\nadd them\n</think>\n\n42 apples<|im_end|>");
    const without = model.encode("<|im_start|>assistant\n42 apples<|im_end|>");
    const wrong = model.encode("<|im_start|>assistant\n43 apples<|im_end|>");
    const spaced = model.encode("<|im_start|>assistant\n42  apples <|im_end|>");
    expect(compareTokens(model, withThink, without, "strict").status).toBe("reasoning_only");
    expect(compareTokens(model, withThink, wrong, "strict").status).toBe("drift");
    expect(compareTokens(model, without, spaced, "strict").status).toBe("drift");
    expect(compareTokens(model, without, spaced, "ignore_strippable").status).toBe("whitespace_only");
    expect(compareTokens(model, withThink, spaced, "ignore_strippable").status).toBe("reasoning_only");
    expect(compareTokens(model, withThink, withThink, "strict").status).toBe("match");
    // The drift check's fast path: the rendered ids after the prompt's, against the record from that index on.
    expect(equalFrom([1, 2, 3, 4], 2, [3, 4])).toBe(true);
    expect(equalFrom([1, 2, 3, 4], 2, [3, 5])).toBe(false);
    expect(equalFrom([1, 2, 3, 4], 2, [3])).toBe(false);
    expect(equalFrom([1, 2, 3], 2, [3, 4])).toBe(false);
    expect(equalFrom(new Int32Array([7, 8]), 2, [])).toBe(true);
  });
});

describe("sampled ids past the tokenizer's vocabulary", () => {
  // Qwen pads its embedding past the tokenizer's ids; an untrained model samples the padding rows.
  const PADDING_ID = 151_674;

  it("are the model's when config.json's vocab_size covers them: appended with mask 1, decoded to nothing", async () => {
    const dir = tempDir("padded-embedding");
    for (const file of ["tokenizer.json", "tokenizer_config.json"]) writeFileSync(path.join(dir, file), readFileSync(path.join(QWEN3_DIR, file)));
    writeFileSync(path.join(dir, "config.json"), JSON.stringify({ vocab_size: 151_936 }));
    const model = await loadChatModel(dir);
    expect([model.vocabSize, model.embeddingSize]).toEqual([151_669, 151_936]);
    const conversation = Conversation.start(model, [{ role: "user", content: "hi" }]);
    const hello = model.encode("Hello");
    conversation.appendSampled([...hello, PADDING_ID, model.endOfTurnTokenId]);
    expect([...conversation.lossMask.slice(-hello.length - 2)]).toEqual(new Array(hello.length + 2).fill(1));
    expect(model.decode([...hello, PADDING_ID], { skipSpecialTokens: true })).toBe("Hello");
  });

  it("are refused without a config.json that covers them, naming both sizes", async () => {
    const model = await loadChatModel(QWEN3_DIR);
    const conversation = Conversation.start(model, [{ role: "user", content: "hi" }]);
    expect(() => conversation.appendSampled([PADDING_ID])).toThrow("sampled token 0 is 151674, not an id of this model (vocabulary 151669, embedding 151669)");
  });
});
