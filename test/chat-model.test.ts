/**
 * The chat model loader: renders and token ids must equal Python transformers' apply_chat_template (stored in
 * test/fixtures/templates/expected.json by make-expected.py) for the real Qwen3 files and the Qwen2.5-style and
 * Llama-3-style fixtures; end-of-turn, EOS and bridge must be found from the files; bad files must be named.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { mkdtempSync, readFileSync, writeFileSync, copyFileSync } from "node:fs";
import path from "node:path";
import { loadChatModel, type ChatModel, type ChatMessage } from "../src/chat/index.js";
import { InputError } from "../src/errors.js";
import { FIXTURES_DIR, QWEN3_DIR, materializeFixtureModel } from "./fixtures/templates/materialize.js";
import { tempDir } from "./helpers/tmp.js";

const spec = JSON.parse(readFileSync(path.join(FIXTURES_DIR, "conversations.json"), "utf8")) as {
  tools: Record<string, unknown>[];
  conversations: Record<string, ChatMessage[]>;
};
type Render = { text: string; ids: number[] };
const expected = JSON.parse(readFileSync(path.join(FIXTURES_DIR, "expected.json"), "utf8")) as Record<
  string,
  Record<string, { full: Render; prompt: Render }>
>;

const temp = tempDir("chat-model");
const models: Record<string, ChatModel> = {};

beforeAll(async () => {
  models.qwen3 = await loadChatModel(QWEN3_DIR);
  models["qwen25-style"] = await loadChatModel(materializeFixtureModel("qwen25-style", temp));
  models["llama3-style"] = await loadChatModel(materializeFixtureModel("llama3-style", temp));
});

describe.each(["qwen3", "qwen25-style", "llama3-style"])("%s matches Python transformers", (name) => {
  it.each(Object.keys(spec.conversations))("renders and tokenizes %s identically", (conversation) => {
    const model = models[name]!;
    const messages = spec.conversations[conversation]!;
    const firstAssistant = messages.findIndex((message) => message.role === "assistant");
    const want = expected[name]![conversation]!;

    const full = model.render(messages, { tools: spec.tools });
    expect(full).toBe(want.full.text);
    expect(model.encode(full)).toEqual(want.full.ids);

    const prompt = model.render(messages.slice(0, firstAssistant), { tools: spec.tools, addGenerationPrompt: true });
    expect(prompt).toBe(want.prompt.text);
    expect(model.encode(prompt)).toEqual(want.prompt.ids);
    expect(model.decode(want.full.ids)).toBe(want.full.text);
  });
});

describe("facts found from the model files", () => {
  it("Qwen3: <|im_end|> ends a turn, the template writes a newline after it", () => {
    const model = models.qwen3!;
    expect(model.endOfTurnToken).toBe("<|im_end|>");
    expect(model.endOfTurnTokenId).toBe(151645);
    expect(model.eosTokenIds).toEqual([151645]);
    expect(model.bridgeText).toBe("\n");
    expect(model.vocabSize).toBe(151669);
  });

  it("Qwen2.5-style: EOS ids come from generation_config.json and tokenizer_config.json", () => {
    const model = models["qwen25-style"]!;
    expect(model.endOfTurnTokenId).toBe(151645);
    expect([...model.eosTokenIds].sort()).toEqual([151643, 151645]);
    expect(model.bridgeText).toBe("\n");
  });

  it("Llama-3-style: <|eot_id|> ends a turn, with nothing after it", () => {
    const model = models["llama3-style"]!;
    expect(model.endOfTurnToken).toBe("<|eot_id|>");
    expect(model.endOfTurnTokenId).toBe(model.tokenToId("<|eot_id|>"));
    expect(model.bridgeText).toBe("");
    expect(model.eosTokenIds).toContain(model.tokenToId("<|eom_id|>"));
    expect(model.bosToken).toBe("<|begin_of_text|>");
  });

  it("special and added tokens are told apart", () => {
    const model = models.qwen3!;
    const toolCall = model.tokenToId("<tool_call>")!;
    expect(model.isSpecialId(toolCall)).toBe(true); // atomic added token
    expect(model.isControlTokenId(toolCall)).toBe(false); // but not dropped by skipSpecialTokens
    expect(model.isControlTokenId(151645)).toBe(true);
    expect(model.isSpecialId(model.encode("hello")[0]!)).toBe(false);
    const ids = model.encode("<tool_call>x<|im_end|>");
    expect(model.decode(ids, { skipSpecialTokens: true })).toBe("<tool_call>x");
    expect(model.decode(ids)).toBe("<tool_call>x<|im_end|>");
  });

  it("encode adds no special tokens and round-trips odd text", () => {
    const model = models["llama3-style"]!;
    const text = "  CRLF\r\n字节 🧮 <|eot_id|> tail  ";
    const ids = model.encode(text);
    expect(ids[0]).not.toBe(model.tokenToId("<|begin_of_text|>"));
    expect(ids).toContain(model.endOfTurnTokenId);
    expect(model.decode(ids)).toBe(text);
  });

  it("JSON-string tool-call arguments render as objects", () => {
    const model = models["qwen25-style"]!;
    const asString = model.render([
      { role: "user", content: "q" },
      { role: "assistant", content: "", tool_calls: [{ function: { name: "f", arguments: '{"a": [1, "é"]}' } }] },
    ]);
    expect(asString).toContain('{"name": "f", "arguments": {"a": [1, "é"]}}');
  });
});

describe("bad model folders are input errors naming the file and field", () => {
  function folderWith(config: unknown): string {
    const dir = mkdtempSync(path.join(temp, "bad-"));
    copyFileSync(path.join(QWEN3_DIR, "tokenizer.json"), path.join(dir, "tokenizer.json"));
    writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(config));
    return dir;
  }

  it("a missing tokenizer.json", async () => {
    const dir = mkdtempSync(path.join(temp, "empty-"));
    await expect(loadChatModel(dir)).rejects.toThrow(/tokenizer\.json/);
    await expect(loadChatModel(dir)).rejects.toBeInstanceOf(InputError);
  });

  it("a chat_template of the wrong type", async () => {
    const dir = folderWith({ chat_template: 42, eos_token: "<|im_end|>" });
    await expect(loadChatModel(dir)).rejects.toThrow(/tokenizer_config\.json: chat_template/);
  });

  it("no chat template at all", async () => {
    const dir = folderWith({ eos_token: "<|im_end|>" });
    await expect(loadChatModel(dir)).rejects.toThrow(/chat_template: missing/);
  });

  it("an eos_token that is not in the vocabulary", async () => {
    const dir = folderWith({ chat_template: "{{ messages[0].content }}", eos_token: "<|nope|>" });
    await expect(loadChatModel(dir)).rejects.toThrow(/tokenizer_config\.json: eos_token/);
  });

  it("a bad generation_config.json", async () => {
    const dir = folderWith({ chat_template: "x", eos_token: "<|im_end|>" });
    writeFileSync(path.join(dir, "generation_config.json"), JSON.stringify({ eos_token_id: "two" }));
    await expect(loadChatModel(dir)).rejects.toThrow(/generation_config\.json: eos_token_id/);
  });
});

describe("what the parsers' auto detection reads", () => {
  it("exposes the template source and the added tokens", () => {
    const model = models["llama3-style"]!;
    expect(model.chatTemplate).toContain("<|start_header_id|>");
    expect(model.addedTokens()).toEqual(expect.arrayContaining(["<|eot_id|>", "<|python_tag|>", "<tool_call>"]));
    expect(models.qwen3!.addedTokens()).not.toContain("<|python_tag|>");
  });
});
