/**
 * ChatModel.encode splits text at added tokens and caches the pieces (src/chat/segmented-encode.ts). It must give
 * exactly the ids the tokenizer gives for the whole text, on any text, for every model folder the suite knows; and
 * it must not split where splitting is not exact.
 */
import { beforeAll, describe, expect, it } from "vitest";
import fc from "fast-check";
import { Tokenizer } from "@huggingface/tokenizers";
import { ChatModel, loadChatModel } from "../src/chat/index.js";
import type { EncodedText } from "../src/chat/model.js";
import { readModelFiles } from "../src/chat/files.js";
import { MemoMap } from "../src/memo-map.js";
import { addedTokenSplitter, encodeSegmented } from "../src/chat/segmented-encode.js";
import { QWEN3_DIR, materializeFixtureModel } from "./fixtures/templates/materialize.js";
import { tempDir } from "./helpers/tmp.js";

interface Pair {
  model: ChatModel;
  whole: (text: string) => number[];
  added: string[];
}
const pairs: Record<string, Pair> = {};

beforeAll(async () => {
  const temp = tempDir("segmented");
  const dirs = {
    qwen3: QWEN3_DIR,
    "qwen25-style": materializeFixtureModel("qwen25-style", temp),
    "llama3-style": materializeFixtureModel("llama3-style", temp),
  };
  for (const [name, dir] of Object.entries(dirs)) {
    const files = await readModelFiles(dir);
    const tokenizer = new Tokenizer(files.tokenizerJson, files.tokenizerConfig);
    pairs[name] = {
      model: await loadChatModel(dir),
      whole: (text) => tokenizer.encode(text, { add_special_tokens: false }).ids,
      added: files.tokenizerJson.added_tokens.map((t) => t.content),
    };
  }
});

/** Text made of added tokens, whitespace runs, digits, words, punctuation and non-ASCII, in any order. */
const textOf = (added: string[]) =>
  fc
    .array(
      fc.oneof(
        fc.constantFrom(...added),
        fc.constantFrom(" ", "  ", "\n", "\n\n", "\t", " \n ", "\r\n"),
        fc.stringMatching(/^[0-9]{1,6}$/),
        fc.stringMatching(/^[A-Za-z']{1,10}$/),
        fc.constantFrom("<", ">", "</", "{\"a\": 1}", "####", "'s", "é", "日本語", "🙂", "\u0301"),
        fc.string({ maxLength: 8 }),
      ),
      { maxLength: 30 },
    )
    .map((parts) => parts.join(""));

describe("segmented encode", () => {
  for (const name of ["qwen3", "qwen25-style", "llama3-style"]) {
    it(`${name}: equals the tokenizer's encode of the whole text, cached or not`, () => {
      const { model, whole, added } = pairs[name]!;
      fc.assert(
        fc.property(textOf(added), (text) => {
          const expected = whole(text);
          expect(model.encode(text)).toEqual(expected);
          // Again: now every piece comes from the cache.
          expect(model.encode(text)).toEqual(expected);
        }),
        { numRuns: 300, seed: 20261122 },
      );
    });
  }

  /** encodeTail's two parts as the one list they stand for. */
  const encodeAfter = (model: ChatModel, known: EncodedText, text: string) => {
    const { reused, tail } = model.encodeTail(known, text);
    return [...known.ids.slice(0, reused), ...tail];
  };

  for (const name of ["qwen3", "qwen25-style", "llama3-style"]) {
    it(`${name}: encodeTail after a known text equals the whole text's encode, whatever follows the known text`, () => {
      const { model, whole, added } = pairs[name]!;
      // The continuation may start inside an added token's text, or complete a longer one.
      const continuation = fc.oneof(
        textOf(added),
        fc.tuple(fc.constantFrom(...added), fc.nat(), textOf(added)).map(([token, at, rest]) => token.slice(at % token.length) + rest),
      );
      fc.assert(
        fc.property(textOf(added), continuation, fc.nat(), (prefix, rest, cut) => {
          const known = { text: prefix, ids: model.encode(prefix) };
          for (const text of [prefix + rest, prefix.slice(0, cut % (prefix.length + 1)) + rest]) {
            expect(encodeAfter(model, known, text)).toEqual(whole(text));
          }
        }),
        { numRuns: 300, seed: 20261126 },
      );
    });
  }

  it("encodeTail on a rendered prompt's conversation, and on a text that differs before the prompt's end", () => {
    const { model } = pairs.qwen3!;
    const known = model.renderTokens([{ role: "user", content: "What is 2 + 2?" }], { addGenerationPrompt: true });
    expect(known.text.endsWith("<|im_start|>assistant\n")).toBe(true);
    const text = `${known.text}It is 4.<|im_end|>\n`;
    expect(encodeAfter(model, known, text)).toEqual(model.encode(text));
    // The prompt's ids through its last added token are reused, not encoded again.
    expect(model.encodeTail(known, text).reused).toBe(known.ids.lastIndexOf(model.tokenToId("<|im_start|>")!) + 1);
    // A text that differs before the cut is encoded whole, and still right.
    const other = known.text.replace("2 + 2", "3 + 3") + "It is 6.";
    expect(encodeAfter(model, known, other)).toEqual(model.encode(other));
  });

  it("encodeTail encodes whole when a longer added token contains the known text's last one", async () => {
    // "<|im_start|>assistant" as an added token: after "…<|im_start|>" a continuation "assistant" joins it.
    const files = await readModelFiles(QWEN3_DIR);
    const id = Math.max(...files.tokenizerJson.added_tokens.map((t) => t.id)) + 1;
    files.tokenizerJson.added_tokens.push({ id, content: "<|im_start|>assistant", special: true } as never);
    const model = new ChatModel(files);
    const known = { text: "hi<|im_start|>", ids: model.encode("hi<|im_start|>") };
    const text = "hi<|im_start|>assistant\nok";
    expect(model.encode(text)).toContain(id);
    expect(encodeAfter(model, known, text)).toEqual(model.encode(text));
  });

  it("splits Qwen3 text at its added tokens, so a repeated piece is encoded once", () => {
    const files = { added_tokens: [{ content: "<|im_start|>" }, { content: "<|im_end|>" }] };
    const splitter = addedTokenSplitter(files);
    expect(splitter).toBeDefined();
    const seen: string[] = [];
    const cache = new MemoMap<string, number[]>(16);
    const encode = (text: string) =>
      encodeSegmented(text, splitter, (t) => (t === "<|im_start|>" ? 1 : 2), (piece) => (seen.push(piece), [piece.length + 100]), cache);
    expect(encode("<|im_start|>system\nhi<|im_end|>\n<|im_start|>user\nq<|im_end|>")).toEqual([1, 109, 2, 101, 1, 106, 2]);
    expect(encode("<|im_start|>system\nhi<|im_end|>\n<|im_start|>user\nother<|im_end|>")).toEqual([1, 109, 2, 101, 1, 110, 2]);
    expect(seen).toEqual(["system\nhi", "\n", "user\nq", "user\nother"]);
  });

  it("does not split when an added token strips whitespace or the pre-tokenizer prepends a space", () => {
    expect(addedTokenSplitter({ added_tokens: [{ content: "<mask>", lstrip: true }] })).toBeUndefined();
    expect(addedTokenSplitter({ added_tokens: [{ content: "<x>", normalized: true }] })).toBeUndefined();
    expect(
      addedTokenSplitter({ added_tokens: [{ content: "<s>" }], pre_tokenizer: { type: "Metaspace", replacement: "▁", prepend_scheme: "first" } }),
    ).toBeUndefined();
    expect(addedTokenSplitter({ added_tokens: [{ content: "<s>" }], pre_tokenizer: { type: "ByteLevel", add_prefix_space: true } })).toBeUndefined();
  });

  it("prefers the longest added token at a position, as the tokenizer's matcher does", () => {
    const splitter = addedTokenSplitter({ added_tokens: [{ content: "<a>" }, { content: "<a><b>" }] })!;
    const ids = encodeSegmented("x<a><b>y<a>", splitter, (t) => (t === "<a>" ? 1 : 2), (p) => [p.charCodeAt(0)], new MemoMap<string, number[]>(4));
    expect(ids).toEqual([120, 2, 121, 1]);
  });
});
