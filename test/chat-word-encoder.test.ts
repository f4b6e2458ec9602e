/**
 * The word-memo encoder (src/chat/word-encoder.ts) must give exactly the library's ids for any piece, memo cold or
 * warm, and must stay off for tokenizers whose normaliser or pre-tokenizer it cannot reproduce word by word.
 */
import { beforeAll, describe, expect, it } from "vitest";
import fc from "fast-check";
import { Tokenizer } from "@huggingface/tokenizers";
import { readModelFiles, type ModelFiles } from "../src/chat/files.js";
import { byteLevelBpe } from "../src/chat/bpe-merge.js";
import { wordMemoEncoder } from "../src/chat/word-encoder.js";
import { QWEN3_DIR } from "./fixtures/templates/materialize.js";
import { gsm8kTexts } from "./helpers/gsm8k-texts.js";

let files: ModelFiles;
let tokenizer: Tokenizer;
let library: (text: string) => number[];

beforeAll(async () => {
  files = await readModelFiles(QWEN3_DIR);
  tokenizer = new Tokenizer(files.tokenizerJson, files.tokenizerConfig);
  library = (text) => tokenizer.encode(text, { add_special_tokens: false }).ids;
});

/** Text made to break word-by-word encoding: whitespace before words, contractions, digit runs, scripts, marks. */
const TRICKY = [
  "a  b   c    d\t\te \n  f",
  "   leading and trailing   ",
  "x \n\n  y\r\n\r\nz\n \n",
  "It's I'M we'Re they'VE you'll he'D 'S's",
  "1234567890 3.14159 1,000,000 -42 +7 1e10 0x1F",
  "日本語のテキスト、句読点。中文：你好！",
  "emoji 🙂🙃 family 👨‍👩‍👧 flags 🇫🇷 keycap 1️⃣",
  "combining e\u0301 a\u0300 x\u0301 \u0301alone Hangul 한국어 \u1100\u1161\u11a8",
  "tabs\tand\u00a0nbsp\u2003em space\u3000ideographic",
  // Pieces hold no added token (the caller splits those out), but the text around them: JSON, tags' neighbours.
  "\n{\"name\": \"f\", \"arguments\": {\"answer\": \"17\"}}\n",
  "#### 18\n\n",
  "Ünïcödé ÀÉÎÕÜ straße ǅ ﬁ ﬀ", // NFC leaves compatibility ligatures alone; decomposed input is composed
  "\u0041\u030a vs \u00c5 vs \u212b",
];

describe("wordMemoEncoder on Qwen3's tokenizer", () => {
  it("is on for Qwen3 (NFC, Split then ByteLevel)", () => {
    expect(wordMemoEncoder(tokenizer, files.tokenizerJson)).toBeTypeOf("function");
  });

  it("encodes GSM8K exactly as the library does, cold and then warm", () => {
    const encode = wordMemoEncoder(tokenizer, files.tokenizerJson)!;
    const texts = gsm8kTexts(600);
    for (const pass of ["cold", "warm"]) {
      for (const [i, text] of texts.entries()) expect(encode(text), `${pass} text ${i}`).toEqual(library(text));
    }
  });

  it("encodes text made to break word-by-word encoding exactly as the library does", () => {
    const encode = wordMemoEncoder(tokenizer, files.tokenizerJson)!;
    for (const text of TRICKY) {
      expect(encode(text), JSON.stringify(text)).toEqual(library(text));
      // Every word again, now from the memo, and the text cut at every position: no word depends on its neighbours.
      expect(encode(text)).toEqual(library(text));
      for (let cut = 1; cut < text.length; cut++) {
        expect(encode(text.slice(0, cut)), JSON.stringify(text.slice(0, cut))).toEqual(library(text.slice(0, cut)));
      }
    }
  });

  it("encodes arbitrary text exactly as the library does", () => {
    const encode = wordMemoEncoder(tokenizer, files.tokenizerJson)!;
    const part = fc.oneof(
      fc.constantFrom(" ", "  ", "\n", "\n\n", "\t", " \n ", "\r\n", "\u00a0", "\u3000"),
      fc.stringMatching(/^[0-9]{1,6}$/),
      fc.stringMatching(/^[A-Za-z']{1,10}$/),
      fc.constantFrom("'s", "'LL", "é", "e\u0301", "日本語", "🙂", "\u0301", "한", "\u1100\u1161", "####", "{\"a\": 1}"),
      fc.string({ maxLength: 8 }),
      fc.string({ unit: "binary", maxLength: 6 }),
    );
    fc.assert(
      fc.property(fc.array(part, { maxLength: 12 }).map((parts) => parts.join("")), (text) => {
        expect(encode(text)).toEqual(library(text));
      }),
      { numRuns: 400, seed: 20261126 },
    );
  });
});

describe("wordMemoEncoder stays off where word-by-word would not be exact", () => {
  const variant = (change: (json: Record<string, unknown>) => void) => {
    const json = structuredClone(files.tokenizerJson) as Record<string, unknown>;
    change(json);
    return wordMemoEncoder(new Tokenizer(json as never, files.tokenizerConfig), json as never);
  };

  it("with a normaliser other than NFC", () => {
    expect(variant((json) => (json.normalizer = { type: "Lowercase" }))).toBeUndefined();
  });

  it("with a pre-tokenizer other than Split then ByteLevel without a pattern", () => {
    expect(variant((json) => (json.pre_tokenizer = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true }))).toBeUndefined();
    expect(variant((json) => (json.pre_tokenizer = { type: "Metaspace", replacement: "▁", prepend_scheme: "always" }))).toBeUndefined();
    expect(
      variant((json) => {
        const pre = json.pre_tokenizer as { pretokenizers: Array<Record<string, unknown>> };
        pre.pretokenizers[0]!.invert = true;
      }),
    ).toBeUndefined();
  });

  it("with no normaliser it is on, and still exact", () => {
    const json = structuredClone(files.tokenizerJson) as Record<string, unknown>;
    json.normalizer = null;
    const plain = new Tokenizer(json as never, files.tokenizerConfig);
    const encode = wordMemoEncoder(plain, json as never)!;
    expect(encode).toBeTypeOf("function");
    for (const text of TRICKY) expect(encode(text)).toEqual(plain.encode(text, { add_special_tokens: false }).ids);
  });
});

describe("the word memo's own BPE (src/chat/bpe-merge.ts)", () => {
  const variantTokenizer = (change: (model: Record<string, unknown>) => void) => {
    const json = structuredClone(files.tokenizerJson) as Record<string, unknown>;
    change(json.model as Record<string, unknown>);
    return { json, tokenizer: new Tokenizer(json as never, files.tokenizerConfig) };
  };

  it("encodes every new word itself: a cold pass over GSM8K never calls the library's encode", () => {
    const counted = new Tokenizer(files.tokenizerJson, files.tokenizerConfig);
    let libraryCalls = 0;
    const encodeWithLibrary = counted.encode.bind(counted);
    counted.encode = ((text: string, options: never) => {
      libraryCalls += 1;
      return encodeWithLibrary(text, options);
    }) as typeof counted.encode;
    const encode = wordMemoEncoder(counted, files.tokenizerJson)!;
    const texts = gsm8kTexts(300);
    for (const [i, text] of texts.entries()) expect(encode(text), `text ${i}`).toEqual(library(text));
    expect(libraryCalls).toBe(0);
  });

  it("merges the same while its pair table starts over again and again as with one that never does", () => {
    // 64 pairs at most: the table fills and starts over many times a text, every pair ranked again from the strings.
    // The default table is checked against the library by the tests above (through the word memo).
    const small = byteLevelBpe(tokenizer, { maxPairs: 64 })!;
    const full = byteLevelBpe(tokenizer)!;
    const words = [...new Set([...TRICKY, ...gsm8kTexts(60)].flatMap((text) => text.normalize("NFC").match(/ ?\p{L}+| ?\p{N}|[^\s\p{L}\p{N}]+|\s+/gu) ?? []))];
    expect(words.length).toBeGreaterThan(500);
    for (const word of words) expect(small(word), JSON.stringify(word)).toEqual(full(word));
    expect(words.filter((word) => small(word) !== undefined).length).toBeGreaterThan(500);
  });

  it("with ignore_merges (Llama 3), a word in the vocabulary is one token, as the library makes it", () => {
    const { json, tokenizer: ignoring } = variantTokenizer((model) => (model.ignore_merges = true));
    const encode = wordMemoEncoder(ignoring, json as never)!;
    for (const text of [...TRICKY, ...gsm8kTexts(100)]) {
      expect(encode(text), JSON.stringify(text)).toEqual(ignoring.encode(text, { add_special_tokens: false }).ids);
    }
  });

  it("is off where the library's BPE step does more than merge", () => {
    expect(byteLevelBpe(tokenizer)).toBeTypeOf("function");
    expect(byteLevelBpe(variantTokenizer((model) => (model.byte_fallback = true)).tokenizer)).toBeUndefined();
    expect(byteLevelBpe(variantTokenizer((model) => (model.end_of_word_suffix = "</w>")).tokenizer)).toBeUndefined();
    expect(byteLevelBpe(variantTokenizer((model) => (model.dropout = 0.1)).tokenizer)).toBeUndefined();
  });

  it("leaves to the library a word whose pieces are not all in the vocabulary", () => {
    // The merges still make "Ġtr", which the vocabulary no longer has: the library writes what it writes for that.
    const { json, tokenizer: holed } = variantTokenizer((model) => delete (model.vocab as Record<string, number>)["Ġtr"]);
    expect(byteLevelBpe(holed)!(" tr")).toBeUndefined();
    const encode = wordMemoEncoder(holed, json as never)!;
    for (const text of [" tr", "a tr b", " track"]) expect(encode(text)).toEqual(holed.encode(text, { add_special_tokens: false }).ids);
  });
});
