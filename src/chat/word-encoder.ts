/**
 * Byte-level BPE encoding through a memo of pre-tokenized words, for the tokenizers where that is exact.
 *
 * Why: @huggingface/tokenizers spends about 2 µs per token, most of it on per-word bookkeeping (a UTF-8 encode and a
 * string join per word, an LRU reorder per word), and a rollout encodes every new prompt and, in the drift check,
 * every sampled response. Natural text repeats its words, so a word's ids, once known, are looked up instead.
 *
 * Why it is exact: BPE never merges across the pre-tokenizer's words, so encode(text) is the concatenation of the
 * encodings of its words. The words are found with the library's own compiled split pattern (the Oniguruma pattern
 * of tokenizer.json, rewritten for JavaScript by the library), after the library's own normaliser; a word's ids are
 * the library's encode of that word alone, computed by bpe-merge.ts (the library's merges, without its per-call
 * pipeline) where that applies. A word matched in context splits to itself alone: every character is
 * matched by some alternative, and only the whitespace lookahead `(?!\S)` can see past a word's end, where it
 * succeeds alone whenever it succeeded in context. test/chat-word-encoder.test.ts compares both encoders on GSM8K
 * and on text chosen to break that (whitespace runs, contractions, digits, CJK, emoji, combining marks).
 *
 * Where it applies: no normaliser or NFC; a pre-tokenizer that is exactly a Split (isolated, not inverted) then a
 * byte-level mapping without its own pattern (Qwen2/2.5/3, Llama 3, DeepSeek V3 write theirs so). Others encode
 * through the library unchanged. The caller splits added tokens out first (segmented-encode.ts), so a piece holds
 * none.
 */
import type { Tokenizer } from "@huggingface/tokenizers";
import { MemoMap } from "../memo-map.js";
import { byteLevelBpe } from "./bpe-merge.js";

/** Words whose ids are kept; past this the memo starts over. */
const MEMO_WORDS = 200_000;
/** Longer words (a run of spaces, a long number-free token) are encoded each time. */
const MAX_MEMO_WORD_CHARS = 64;

type TokenizerJsonShape = { normalizer?: unknown; pre_tokenizer?: unknown } & Record<string, unknown>;

/** The library's split pattern when the fast path is exact for this tokenizer, else undefined. */
function splitPatternOf(tokenizer: Tokenizer, json: TokenizerJsonShape): RegExp | undefined {
  const normalizer = json.normalizer as { type?: string } | null | undefined;
  if (normalizer && normalizer.type !== "NFC") return undefined;
  const pre = json.pre_tokenizer as { type?: string; pretokenizers?: Array<Record<string, unknown>> } | null | undefined;
  if (pre?.type !== "Sequence" || pre.pretokenizers?.length !== 2) return undefined;
  const [split, byteLevel] = pre.pretokenizers;
  if (split?.type !== "Split" || split.behavior !== "Isolated" || split.invert !== false) return undefined;
  if (typeof (split.pattern as { Regex?: unknown } | undefined)?.Regex !== "string") return undefined;
  if (byteLevel?.type !== "ByteLevel" || byteLevel.use_regex !== false || byteLevel.add_prefix_space !== false) return undefined;
  // The library's own objects: its rewrite of the pattern is what its encode splits with.
  const internals = tokenizer as unknown as {
    pre_tokenizer?: { tokenizers?: Array<{ pattern?: unknown }> };
    remove_space?: boolean;
    do_lowercase_and_remove_accent?: boolean;
  };
  if (internals.remove_space || internals.do_lowercase_and_remove_accent) return undefined;
  const pattern = internals.pre_tokenizer?.tokenizers?.[0]?.pattern;
  if (!(pattern instanceof RegExp) || !pattern.global) return undefined;
  return new RegExp(pattern.source, pattern.flags);
}

/**
 * An encoder of pieces free of added tokens, or undefined when the word memo would not be exact for this tokenizer.
 */
export function wordMemoEncoder(tokenizer: Tokenizer, json: TokenizerJsonShape): ((piece: string) => number[]) | undefined {
  const pattern = splitPatternOf(tokenizer, json);
  if (!pattern) return undefined;
  const nfc = (json.normalizer as { type?: string } | null | undefined)?.type === "NFC";
  const memo = new MemoMap<string, number[]>(MEMO_WORDS);
  const merge = byteLevelBpe(tokenizer);
  const encodeWord = (word: string): number[] => {
    const known = memo.get(word);
    if (known !== undefined) return known;
    const ids = merge?.(word) ?? tokenizer.encode(word, { add_special_tokens: false }).ids;
    if (word.length <= MAX_MEMO_WORD_CHARS) memo.set(word, ids);
    return ids;
  };
  return (piece) => {
    // NFC leaves ASCII as it is; the check spares the normaliser on most text.
    const text = nfc && !isAscii(piece) ? piece.normalize("NFC") : piece;
    const out: number[] = [];
    let from = 0;
    pattern.lastIndex = 0;
    for (let match = pattern.exec(text); match; match = pattern.exec(text)) {
      // Text between matches is a word too (the library's "isolated" split keeps it).
      if (match.index > from) for (const id of encodeWord(text.slice(from, match.index))) out.push(id);
      const word = match[0];
      if (word.length === 0) {
        // As matchAll does: step over one code point, not half of a surrogate pair.
        pattern.lastIndex += (text.codePointAt(match.index) ?? 0) > 0xffff ? 2 : 1;
        continue;
      }
      for (const id of encodeWord(word)) out.push(id);
      from = match.index + word.length;
    }
    if (from < text.length) for (const id of encodeWord(text.slice(from))) out.push(id);
    return out;
  };
}

function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false;
  return true;
}
