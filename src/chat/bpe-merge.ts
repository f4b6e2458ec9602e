/**
 * Byte-level BPE of one pre-tokenized word: what the word memo (word-encoder.ts) computes for a word it has not seen.
 *
 * Why: @huggingface/tokenizers encodes one new word in 40-60 µs on a 2-core Xeon (the whole pipeline per call, and a
 * priority queue that JSON-stringifies each pair it ranks), and new words keep coming on distinct conversations:
 * GSM8K brings about two a question (names, items) even after its first thousand questions. Here a word costs about a
 * third of that (15 against 43 µs over GSM8K's words; docs/benchmarks.md).
 *
 * Exact: the library's byte-level step maps the word's UTF-8 bytes to GPT-2's printable stand-ins; its BPE step merges,
 * again and again, the adjacent pair of lowest merge rank, the leftmost of equal ranks (its queue orders by rank,
 * then by the left piece's position), until no adjacent pair has a rank; each piece is then looked up in the same
 * vocabulary Map. `ignore_merges` (Llama 3) first looks up the whole word, as the library does. This applies only
 * where the library's BPE step does nothing more: no dropout, end-of-word suffix, continuing-subword suffix or byte
 * fallback; a piece missing from the vocabulary (impossible in a byte-level vocabulary, but the library would write
 * its unknown token) returns undefined, and the caller asks the library. test/chat-word-encoder.test.ts compares the
 * word memo, which encodes through this, with the library on GSM8K and on text made to break it.
 */
import type { Tokenizer } from "@huggingface/tokenizers";
import { byteStandIns } from "./byte-alphabet.js";
import { rankKey } from "./bpe-tables.js";

interface BpeModelShape {
  config?: { dropout?: unknown };
  bpe_ranks?: unknown;
  tokens_to_ids?: unknown;
  end_of_word_suffix?: unknown;
  continuing_subword_suffix?: unknown;
  byte_fallback?: unknown;
  ignore_merges?: unknown;
}

/** Words longer than this (in bytes) go to the library: the merge loop below is quadratic in a word's length. */
const MAX_WORD_BYTES = 256;

/**
 * The word's ids, or undefined where the library must encode it; the function itself is undefined for a tokenizer
 * whose BPE step does more than merge (see above). Pass only words the pre-tokenizer split out, free of added tokens.
 */
export function byteLevelBpe(tokenizer: Tokenizer): ((word: string) => number[] | undefined) | undefined {
  const model = (tokenizer as unknown as { model?: BpeModelShape }).model;
  if (!model || !(model.bpe_ranks instanceof Map) || !(model.tokens_to_ids instanceof Map)) return undefined;
  if (model.config?.dropout || model.end_of_word_suffix || model.continuing_subword_suffix || model.byte_fallback) return undefined;
  const ranks = model.bpe_ranks as Map<string, number>;
  const ids = model.tokens_to_ids as Map<string, number>;
  const ignoreMerges = model.ignore_merges === true;
  const standIns = byteStandIns();
  const utf8 = new TextEncoder();

  return (word) => {
    const bytes = utf8.encode(word);
    if (bytes.length === 0 || bytes.length > MAX_WORD_BYTES) return undefined;
    const pieces: string[] = new Array(bytes.length);
    for (let i = 0; i < bytes.length; i++) pieces[i] = standIns[bytes[i]!]!;
    if (ignoreMerges) {
      const whole = ids.get(pieces.join(""));
      if (whole !== undefined) return [whole];
    }
    // pairRanks[i]: the rank of (pieces[i], pieces[i + 1]), Infinity for none; only a merge's neighbours change.
    const rankOf = (i: number) => ranks.get(rankKey([pieces[i]!, pieces[i + 1]!])) ?? Infinity;
    const pairRanks: number[] = new Array(pieces.length - 1);
    for (let i = 0; i < pieces.length - 1; i++) pairRanks[i] = rankOf(i);
    for (;;) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i < pairRanks.length; i++) {
        if (pairRanks[i]! < bestRank) {
          bestRank = pairRanks[i]!;
          best = i;
        }
      }
      if (best < 0) break;
      pieces[best] += pieces[best + 1]!;
      pieces.splice(best + 1, 1);
      pairRanks.splice(best, 1);
      if (best > 0) pairRanks[best - 1] = rankOf(best - 1);
      if (best < pairRanks.length) pairRanks[best] = rankOf(best);
    }
    const out: number[] = new Array(pieces.length);
    for (let i = 0; i < pieces.length; i++) {
      const id = ids.get(pieces[i]!);
      if (id === undefined) return undefined;
      out[i] = id;
    }
    return out;
  };
}
