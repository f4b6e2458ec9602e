/**
 * buildTokenizer (src/chat/bpe-tables.ts) builds a BPE tokenizer's vocab and merge-rank tables itself, for start-up
 * time. The tables must be the library's own, entry for entry and in the same order, for the real Qwen3 tokenizer and
 * for small tokenizers made to hit every branch: merges in both formats, parts JSON must escape, an added token that
 * takes a vocab entry's text, an unknown token. What the library builds any other way goes through it unchanged.
 */
import v8 from "node:v8";
import vm from "node:vm";
import { beforeAll, describe, expect, it } from "vitest";
import { Tokenizer } from "@huggingface/tokenizers";
import { ChatModel } from "../src/chat/model.js";
import { buildTokenizer, vocabSizeOf, type BpeModelInternals } from "../src/chat/bpe-tables.js";
import { readModelFiles, type ModelFiles } from "../src/chat/files.js";
import { QWEN3_DIR } from "./fixtures/templates/materialize.js";
import { gsm8kTexts } from "./helpers/gsm8k-texts.js";

const tablesOf = (tokenizer: Tokenizer) => (tokenizer as unknown as { model: BpeModelInternals }).model;

/** Every table as plain arrays, holes kept as holes' positions, so toEqual compares order as well as content. */
function snapshot(tokenizer: Tokenizer) {
  const model = tablesOf(tokenizer);
  return {
    tokensToIds: [...model.tokens_to_ids],
    vocabLength: model.vocab.length,
    vocab: Object.entries(model.vocab),
    // The merge list is not compared: the library reads it only in its constructor, to build the ranks (compared
    // below, merge for merge and in order), and buildTokenizer does not keep it (see the Qwen3 test).
    ranks: [...model.bpe_ranks],
    unkTokenId: model.unk_token_id,
  };
}

function expectSameAsLibrary(json: Record<string, unknown>, config: Record<string, unknown>, texts: string[]) {
  const ours = buildTokenizer(structuredClone(json), config);
  const library = new Tokenizer(structuredClone(json), config);
  // The library keeps tokenizer.json's merge list; buildTokenizer lets it go once ranked (see the Qwen3 test).
  expect(tablesOf(library).merges.length).toBe(tablesOf(library).bpe_ranks.size);
  expect(tablesOf(ours).merges).toEqual([]);
  expect(snapshot(ours)).toEqual(snapshot(library));
  // The vocab size is get_vocab's largest id + 1, read without building get_vocab's Map.
  expect(vocabSizeOf(ours)).toBe([...library.get_vocab(true).values()].reduce((a, b) => Math.max(a, b), -1) + 1);
  for (const text of texts) {
    expect(ours.encode(text, { add_special_tokens: false }).ids).toEqual(library.encode(text, { add_special_tokens: false }).ids);
  }
  return ours;
}

describe("the Qwen3 tokenizer", () => {
  let files: ModelFiles;
  beforeAll(async () => {
    files = await readModelFiles(QWEN3_DIR);
  });

  it("gets the library's tables, entry for entry, and its ids on GSM8K", () => {
    const texts = gsm8kTexts(50, "test").map((text) => `${text} "quoted" back\\slash <|im_end|>`);
    const ours = expectSameAsLibrary(files.tokenizerJson, files.tokenizerConfig, texts);
    expect(tablesOf(ours).bpe_ranks.size).toBe(151_387);
    expect(tablesOf(ours).tokens_to_ids.size).toBeGreaterThan(151_000);
  });
});

describe("a loaded chat model", () => {
  it("keeps nothing of the parsed tokenizer.json (151,387 merge arrays to mark at every full collection)", async () => {
    v8.setFlagsFromString("--expose-gc");
    const gc = vm.runInNewContext("gc") as () => void;
    let files: ModelFiles | undefined = await readModelFiles(QWEN3_DIR);
    const json = new WeakRef(files.tokenizerJson);
    const merges = new WeakRef((files.tokenizerJson.model as { merges: object }).merges);
    const model = new ChatModel(files);
    files = undefined;
    // Both lazily built parts built: the decode tables, the word memo's encoder.
    expect(model.decode(model.encode("Natalia sold 48 clips."))).toBe("Natalia sold 48 clips.");
    await new Promise((resolve) => setImmediate(resolve));
    gc();
    expect(json.deref()).toBeUndefined();
    expect(merges.deref()).toBeUndefined();
    expect(model.encode("clips")).toEqual(model.encode("clips"));
  });
});

/** A byte-level BPE over a few letters, with the pre-tokenizer Qwen uses, so encode exercises the merges. */
function smallTokenizer(model: Record<string, unknown>, addedTokens: Array<Record<string, unknown>>) {
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: null,
    pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: true },
    post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: true },
    model,
  };
}

const added = (id: number, content: string) => ({ id, content, special: true, single_word: false, lstrip: false, rstrip: false, normalized: false });

describe("small tokenizers", () => {
  const vocab = { a: 0, b: 1, '"': 2, "\\": 3, ab: 4, 'a"': 5, "\\b": 6, "Ġ": 7, "Ġa": 8, "<unk>": 9, "ĉ": 10, "ĉa": 11 };

  it("merges written as pairs, with parts JSON escapes", () => {
    const merges = [["a", "b"], ["a", '"'], ["\\", "b"], ["Ġ", "a"], ["ĉ", "a"]];
    expectSameAsLibrary(smallTokenizer({ type: "BPE", vocab, merges, unk_token: "<unk>" }, []), {}, ['ab a"b \\b a\tab "a']);
  });

  it("merges written as 'a b' strings (the older format)", () => {
    const merges = ["a b", 'a "', "\\ b", "Ġ a", "ĉ a"];
    expectSameAsLibrary(smallTokenizer({ type: "BPE", vocab, merges, unk_token: "<unk>" }, []), {}, ['ab a"b \\b a\tab']);
  });

  it("an added token that takes a vocab entry's text moves it to the added id, as the library does", () => {
    const json = smallTokenizer({ type: "BPE", vocab, merges: [["a", "b"]], unk_token: null }, [added(12, "ab"), added(13, "<|end|>")]);
    const ours = expectSameAsLibrary(json, {}, ["ab<|end|>ba"]);
    expect(tablesOf(ours).tokens_to_ids.get("ab")).toBe(12);
    expect(tablesOf(ours).vocab[4]).toBe("ab");
    expect(tablesOf(ours).unk_token_id).toBeUndefined();
  });

  it("a merge list the library would not read as pairs, and other model types, go through the library", () => {
    const odd = smallTokenizer({ type: "BPE", vocab, merges: [["a", "b", "c"]], unk_token: "<unk>" }, []);
    const ours = buildTokenizer(structuredClone(odd), {});
    expect(tablesOf(ours).merges).toEqual([["a", "b", "c"]]);
    const wordPiece = smallTokenizer({ type: "WordPiece", vocab: { "[UNK]": 0, a: 1, "##b": 2 }, unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100 }, []);
    const wordPieceTokenizer = buildTokenizer(structuredClone(wordPiece), {});
    expect(wordPieceTokenizer.encode("ab", { add_special_tokens: false }).ids).toEqual([1, 2]);
    expect(vocabSizeOf(wordPieceTokenizer)).toBe(3);
  });
});
