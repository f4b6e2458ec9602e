import { describe, expect, it } from "vitest";
import { Conversation, loadChatModel } from "../src/chat/index.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";

describe("ChatModel.encode cache", () => {
  it("gives the same ids for a repeated long text, and callers cannot corrupt the cached copy", async () => {
    const model = await loadChatModel(QWEN3_DIR);
    const text = `<|im_start|>user\n${"How many eggs does Janet sell? ".repeat(20)}<|im_end|>\n`;
    const reference = [...model.encode(text)];
    expect(model.decode(reference)).toBe(text);
    // The repeated call comes from the cache; mutating what it returned must not reach the next caller.
    const first = model.encode(text);
    expect(first).toEqual(reference);
    first.push(-1);
    first[0] = -2;
    const second = model.encode(text);
    expect(second).toEqual(reference);
    expect(model.decode(second)).toBe(text);
  });
});

describe("the drift check and the encode cache", () => {
  it("reuses cached pieces but adds none of the sampled turns' new text, and still matches", async () => {
    const model = await loadChatModel(QWEN3_DIR);
    const pieces = () => (model as unknown as { pieceCache: { size: number } }).pieceCache.size;
    const user = { role: "user" as const, content: "What is 6 times 7?" };
    const answer = "Six sevens are forty-two, so the answer is 42. A sentence no other text in this test has.";
    const conversation = Conversation.start(model, [user]);
    // What a model following the template samples: the template's text for the answer, through the end-of-turn token.
    const prompt = model.render([user], { addGenerationPrompt: true });
    const full = model.render([user, { role: "assistant", content: answer }]);
    const sampled = full.slice(prompt.length, full.lastIndexOf(model.endOfTurnToken) + model.endOfTurnToken.length);
    // Encoded by another instance, as an engine samples it: this model's cache never saw the text.
    const engine = await loadChatModel(QWEN3_DIR);
    conversation.appendSampled(engine.encode(sampled));
    const before = pieces();
    expect(conversation.driftCheck().status).toBe("match");
    expect(pieces()).toBe(before);
    // A text encoded the ordinary way is remembered.
    model.encode(`${answer} Again.`);
    expect(pieces()).toBe(before + 1);
  });
});
