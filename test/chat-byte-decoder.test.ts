/**
 * The table decoder (src/chat/byte-decoder.ts) must decode exactly as @huggingface/tokenizers does: the record's
 * segment texts, the parser's text and the reward's text all come from it. Compared here with the library's own
 * decode on many random id lists built to hit the edges: UTF-8 characters split across tokens and across added
 * tokens, special and non-special added tokens with skipSpecialTokens on and off, additional_special_tokens, ids past
 * the tokenizer's vocabulary (embedding padding), and holes.
 */
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadChatModel, type ChatModel } from "../src/chat/index.js";
import { byteLevelDecoder } from "../src/chat/byte-decoder.js";
import { seededRandom } from "../src/data/random.js";
import { materializeFixtureModel } from "./fixtures/templates/materialize.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { tempDir } from "./helpers/tmp.js";

const TEXTS = [
  "Janet’s ducks lay 16 eggs per day. 🦆🥚 She eats three for breakfast.",
  "数学题：小明有 5 个苹果，吃了 2 个。还剩几个？答案是 3。",
  "Ça coûte 12,50 € — naïve façade, Zürich, São Paulo, Ελληνικά, русский, العربية, हिन्दी",
  '<tool_call>\n{"name": "calc", "arguments": {"expr": "3 * 4 ÷ 2"}}\n</tool_call>',
  "emoji with joiners: 👩‍👩‍👧‍👦 🏳️‍🌈 and variation selectors ✌🏽 \u200b\ufeff tail",
  "  leading spaces, tabs\t\tand\r\nnewlines\n\n\n",
];

/** Random id lists: slices of encoded texts (cut anywhere, so characters split), mixed with added and random ids. */
function randomIdLists(model: ChatModel, seed: number, count: number): number[][] {
  const random = seededRandom(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const encoded = TEXTS.map((text) => model.encode(text));
  const added = model.addedTokens().map((token) => model.tokenToId(token)!);
  const lists: number[][] = [];
  for (let k = 0; k < count; k++) {
    const ids: number[] = [];
    const parts = 1 + Math.floor(random() * 5);
    for (let p = 0; p < parts; p++) {
      const roll = random();
      if (roll < 0.5) {
        const source = pick(encoded);
        const from = Math.floor(random() * source.length);
        ids.push(...source.slice(from, from + 1 + Math.floor(random() * 12)));
      } else if (roll < 0.7) {
        ids.push(pick(added));
      } else if (roll < 0.9) {
        ids.push(Math.floor(random() * model.vocabSize));
      } else {
        // Past the tokenizer: padding rows of the embedding and beyond.
        ids.push(model.vocabSize + Math.floor(random() * 400));
      }
    }
    lists.push(ids);
  }
  return lists;
}

function expectSameAsLibrary(model: ChatModel, lists: number[][]): void {
  let compared = 0;
  for (const ids of lists) {
    for (const skipSpecialTokens of [false, true]) {
      const fast = model.decode(ids, { skipSpecialTokens });
      const slow = model.decodeWithLibrary(ids, { skipSpecialTokens });
      if (fast !== slow) expect({ ids, skipSpecialTokens, fast }).toEqual({ ids, skipSpecialTokens, fast: slow });
      compared += 1;
    }
  }
  expect(compared).toBe(lists.length * 2);
}

describe("table decoder", () => {
  it("decodes the Qwen3 tokenizer exactly as the library, on 4000 random id lists", async () => {
    const model = await loadChatModel(QWEN3_DIR);
    expect(byteLevelDecoder({ decoder: { type: "ByteLevel" }, model: { type: "BPE" }, addedTokens: [], specialTexts: new Set(), idToToken: () => "a", vocabSize: 1 })).toBeDefined();
    expectSameAsLibrary(model, randomIdLists(model, 1, 4000));
    // Every single id alone, the other place split characters show (a lone continuation byte is U+FFFD).
    const singles = Array.from({ length: model.vocabSize + 8 }, (_, id) => [id]);
    for (const ids of singles) expect(model.decode(ids)).toBe(model.decodeWithLibrary(ids));
    // A leading byte-order mark is text like any other: kept, as the library keeps it.
    for (const text of ["\uFEFFhello", "\uFEFF", "a\uFEFFb"]) expect(model.decode(model.encode(text))).toBe(text);
  });

  it("matches with added tokens that are not special, additional_special_tokens and embedding padding", async () => {
    const dir = tempDir("byte-decoder");
    const tokenizer = JSON.parse(readFileSync(path.join(QWEN3_DIR, "tokenizer.json"), "utf8"));
    // <tool_call> is a non-special added token in Qwen3; mark one more plain, and one plain vocab text special.
    for (const token of tokenizer.added_tokens) if (token.content === "<|box_start|>") token.special = false;
    writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(tokenizer));
    const config = JSON.parse(readFileSync(path.join(QWEN3_DIR, "tokenizer_config.json"), "utf8"));
    config.additional_special_tokens = ["<|box_end|>", "Hello", { content: "ignored" }];
    delete config.added_tokens_decoder;
    writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(config));
    writeFileSync(path.join(dir, "config.json"), JSON.stringify({ vocab_size: 152_064 }));
    const model = await loadChatModel(dir);
    expect(model.embeddingSize).toBeGreaterThan(model.vocabSize);
    const hello = model.tokenToId("Hello")!;
    expect(model.decode([hello, hello], { skipSpecialTokens: true })).toBe(model.decodeWithLibrary([hello, hello], { skipSpecialTokens: true }));
    const lists = randomIdLists(model, 2, 2000).map((ids, i) => (i % 3 === 0 ? [hello, ...ids, hello] : ids));
    expectSameAsLibrary(model, lists);
  });

  it("matches on the llama3-style fixture (header tokens added to the vocabulary)", async () => {
    const model = await loadChatModel(materializeFixtureModel("llama3-style"));
    expectSameAsLibrary(model, randomIdLists(model, 3, 1500));
  });

  it("gives each token's own bytes: a character split across tokens comes back whole from their bytes, not from their texts", async () => {
    const model = await loadChatModel(QWEN3_DIR);
    for (const text of TEXTS) {
      const ids = model.encode(text);
      expect(Buffer.from(ids.flatMap((id) => model.tokenBytes(id))).toString("utf8")).toBe(text);
    }
    // The texts hold characters that no one token spells: a token's decoded text shows U+FFFD where its bytes do not.
    const ids = TEXTS.flatMap((text) => model.encode(text));
    const partial = ids.filter((id) => model.decode([id]).includes("\ufffd"));
    expect(partial.length).toBeGreaterThan(0);
    for (const id of partial) {
      expect(Buffer.from(model.tokenBytes(id)).toString("utf8")).toBe(model.decode([id]));
      expect(Buffer.from(model.decode([id]), "utf8").equals(Buffer.from(model.tokenBytes(id)))).toBe(false);
    }
    expect(Buffer.from(model.tokenBytes(model.tokenToId("<|im_end|>")!)).toString("utf8")).toBe("<|im_end|>");
  });

  it("leaves other decoders to the library", async () => {
    const base = { addedTokens: [], specialTexts: new Set<string>(), idToToken: () => "a", vocabSize: 1 };
    expect(byteLevelDecoder({ ...base, decoder: { type: "Metaspace" }, model: { type: "BPE" } })).toBeUndefined();
    expect(byteLevelDecoder({ ...base, decoder: { type: "Sequence", decoders: [] }, model: { type: "BPE" } })).toBeUndefined();
    expect(byteLevelDecoder({ ...base, decoder: { type: "ByteLevel" }, model: { type: "WordPiece" } })).toBeUndefined();
    expect(byteLevelDecoder({ ...base, decoder: { type: "ByteLevel" }, model: { type: "BPE", unk_token: "<unk>" } })).toBeUndefined();
    // A model folder with a Metaspace decoder still decodes (through the library).
    const dir = tempDir("byte-decoder-metaspace");
    const tokenizer = JSON.parse(readFileSync(path.join(QWEN3_DIR, "tokenizer.json"), "utf8"));
    tokenizer.decoder = { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true };
    writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(tokenizer));
    copyFileSync(path.join(QWEN3_DIR, "tokenizer_config.json"), path.join(dir, "tokenizer_config.json"));
    const model = await loadChatModel(dir);
    const ids = model.encode("a▁b c");
    expect(model.decode(ids)).toBe(model.decodeWithLibrary(ids));
  });
});
