/**
 * A model's template variables (data.apply_chat_template_kwargs): every render of the model gets them, a render's own
 * variables win over them, and a conversation's prompt, deltas and drift check all use them. Qwen3's enable_thinking
 * shows each: with it off, the generation prompt closes an empty think block, which the re-render of a last assistant
 * turn also writes, so a one-turn conversation matches only when the drift check renders with the same variables.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { Conversation, loadChatModel, type ChatMessage, type ChatModel } from "../src/chat/index.js";
import { IM_END, QWEN3_DIR } from "./helpers/qwen3.js";

const THINK_OFF = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
const user: ChatMessage[] = [{ role: "user", content: "What is 2 + 2?" }];

let plain: ChatModel;
let off: ChatModel;
beforeAll(async () => {
  plain = await loadChatModel(QWEN3_DIR);
  off = await loadChatModel(QWEN3_DIR, { templateKwargs: { enable_thinking: false } });
});

describe("a model's template variables", () => {
  it("render into every generation prompt; a render's own variables win", () => {
    expect(plain.render(user, { addGenerationPrompt: true }).endsWith("<|im_start|>assistant\n")).toBe(true);
    expect(off.render(user, { addGenerationPrompt: true }).endsWith(THINK_OFF)).toBe(true);
    expect(off.render(user, { addGenerationPrompt: true, templateKwargs: { enable_thinking: true } }).endsWith("<|im_start|>assistant\n")).toBe(true);
    expect(plain.render(user, { addGenerationPrompt: true, templateKwargs: { enable_thinking: false } })).toBe(off.render(user, { addGenerationPrompt: true }));
  });

  it("a conversation's prompt and drift check use them: one sampled turn matches its re-render", () => {
    const answer = [...off.encode("4"), IM_END];
    const conversation = Conversation.start(off, user);
    expect(off.decode(conversation.tokenIds).endsWith(THINK_OFF)).toBe(true);
    conversation.appendSampled(answer);
    expect(conversation.driftCheck("strict").status).toBe("match");
    // Without them the same turn is recorded without the think block the re-render writes: reasoning only.
    const without = Conversation.start(plain, user);
    without.appendSampled(answer);
    expect(without.driftCheck("strict").status).toBe("reasoning_only");
  });
});
