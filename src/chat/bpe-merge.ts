/**
 * Byte-level BPE of one pre-tokenized word: what the word memo (word-encoder.ts) computes for a word it has not seen.
 *
 * Why: @huggingface/tokenizers encodes one new word in 40-60 µs on a 2-core Xeon (the whole pipeline per call, and a
 * priority queue that JSON-stringifies each pair it ranks), and new words keep coming on distinct conversations:
 * GSM8K brings about two a question (names, items) even after its first thousand questions. Here a word costs about a
 * third of that (15 against 43 µs over GSM8K's words; docs/benchmarks.md), and on token ids (PairTable) less again:
 * 5 against 8 µs for a new word among new pairs, 1.5 against 7.5 once its pairs are known.
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
  /** Token strings by id. */
  vocab?: unknown;
  end_of_word_suffix?: unknown;
  continuing_subword_suffix?: unknown;
  byte_fallback?: unknown;
  ignore_merges?: unknown;
}

/** Pairs kept before the table starts over: 16 MB of typed arrays at most (16 bytes a slot, half the slots used). */
const MAX_PAIRS = 1 << 19;
const FIRST_SLOTS = 1 << 14;

/** Words longer than this (in bytes) go to the library: the merge loop below is quadratic in a word's length. */
const MAX_WORD_BYTES = 256;

/**
 * The word's ids, or undefined where the library must encode it; the function itself is undefined for a tokenizer
 * whose BPE step does more than merge (see above). Pass only words the pre-tokenizer split out, free of added tokens.
 */
export function byteLevelBpe(
  tokenizer: Tokenizer,
  { maxPairs = MAX_PAIRS }: { maxPairs?: number } = {},
): ((word: string) => number[] | undefined) | undefined {
  const model = (tokenizer as unknown as { model?: BpeModelShape }).model;
  if (!model || !(model.bpe_ranks instanceof Map) || !(model.tokens_to_ids instanceof Map)) return undefined;
  if (model.config?.dropout || model.end_of_word_suffix || model.continuing_subword_suffix || model.byte_fallback) return undefined;
  const ranks = model.bpe_ranks as Map<string, number>;
  const ids = model.tokens_to_ids as Map<string, number>;
  const ignoreMerges = model.ignore_merges === true;
  const standIns = byteStandIns();
  const utf8 = new TextEncoder();
  const byStrings = mergeByStrings(ranks, ids);
  const pairs = PairTable.over(ranks, ids, Array.isArray(model.vocab) ? (model.vocab as string[]) : undefined, standIns, maxPairs);

  return (word) => {
    const bytes = utf8.encode(word);
    if (bytes.length === 0 || bytes.length > MAX_WORD_BYTES) return undefined;
    if (ignoreMerges) {
      let whole = "";
      for (const byte of bytes) whole += standIns[byte]!;
      const id = ids.get(whole);
      if (id !== undefined) return [id];
    }
    const pieces = pairs?.startPieces(bytes);
    return (pieces && pairs!.merge(pieces)) ?? byStrings(bytes, standIns);
  };
}

/**
 * The merge loop on the pieces' strings, with the library's rank keys: for a word whose merges leave the vocabulary
 * (PairTable.merge gives up), and for a vocabulary whose ids do not map back to their strings.
 */
function mergeByStrings(ranks: Map<string, number>, ids: Map<string, number>) {
  return (bytes: Uint8Array, standIns: readonly string[]): number[] | undefined => {
    const pieces: string[] = new Array(bytes.length);
    for (let i = 0; i < bytes.length; i++) pieces[i] = standIns[bytes[i]!]!;
    // pairRanks[i]: the rank of (pieces[i], pieces[i + 1]), Infinity for none; only a merge's neighbours change.
    const rankOf = (i: number) => ranks.get(rankKey([pieces[i]!, pieces[i + 1]!])) ?? Infinity;
    const pairRanks: number[] = new Array(pieces.length - 1);
    for (let i = 0; i < pieces.length - 1; i++) pairRanks[i] = rankOf(i);
    for (let best = lowest(pairRanks); best >= 0; best = lowest(pairRanks)) {
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

/** The index of the lowest rank, the leftmost of equal ones (the library's queue order); -1 when none is finite. */
function lowest(pairRanks: readonly number[]): number {
  let best = -1;
  let bestRank = Infinity;
  for (let i = 0; i < pairRanks.length; i++) {
    if (pairRanks[i]! < bestRank) {
      bestRank = pairRanks[i]!;
      best = i;
    }
  }
  return best;
}

/** The first slot to probe for the pair (a, b) in a table of mask + 1 slots. */
const pairHash = (a: number, b: number, mask: number): number => (Math.imul(a, 0x9e3779b1) ^ Math.imul(b, 0x85ebca6b)) & mask;

const NO_MERGE = -1;
/** A pair whose merge makes a piece outside the vocabulary: the word goes to the string loop. */
const OFF_VOCABULARY = -2;

/**
 * Merge ranks by the two pieces' token ids, in typed arrays (open addressing), filled as pairs are first met.
 *
 * Why: the string loop builds the library's rank key (`["a","b"]`) for every adjacent pair and looks it up in a Map
 * of 151k string keys, ~0.8 µs a lookup, ~7 µs for an average new GSM8K word; by ids a lookup is a multiply and a few
 * array reads. Filled lazily: ranking all the merges by ids up front cost ~100 ms of start-up. Exact where every id
 * met maps back to its string (`vocab[ids.get(s)] === s`), so a list of ids is the list of strings the library
 * merges: each pair's rank is the library's own (its rank key), and its merged id the vocabulary's id of the joined
 * string; a merge whose string the vocabulary lacks sends the word to the string loop.
 */
class PairTable {
  private left = new Int32Array(0);
  private right = new Int32Array(0);
  private rank = new Int32Array(0);
  private merged = new Int32Array(0);
  private count = 0;

  private constructor(
    private readonly ranks: Map<string, number>,
    private readonly ids: Map<string, number>,
    private readonly vocab: readonly string[],
    private readonly byteIds: Int32Array,
    private readonly maxPairs: number,
  ) {
    this.allocate(FIRST_SLOTS);
  }

  /** The table, or undefined when a byte's stand-in is not a vocabulary entry of its own. */
  static over(
    ranks: Map<string, number>,
    ids: Map<string, number>,
    vocab: readonly string[] | undefined,
    standIns: readonly string[],
    maxPairs: number,
  ): PairTable | undefined {
    if (!vocab) return undefined;
    const byteIds = new Int32Array(256);
    for (let byte = 0; byte < 256; byte++) {
      const id = ids.get(standIns[byte]!);
      if (id === undefined || vocab[id] !== standIns[byte]) return undefined;
      byteIds[byte] = id;
    }
    return new PairTable(ranks, ids, vocab, byteIds, maxPairs);
  }

  /** Empty slots, `size` of them (a power of two). */
  private allocate(size: number): void {
    this.left = new Int32Array(size).fill(-1);
    this.right = new Int32Array(size);
    this.rank = new Int32Array(size);
    this.merged = new Int32Array(size);
    this.count = 0;
  }

  startPieces(bytes: Uint8Array): number[] {
    const pieces: number[] = new Array(bytes.length);
    for (let i = 0; i < bytes.length; i++) pieces[i] = this.byteIds[bytes[i]!]!;
    return pieces;
  }

  /** The merge loop of mergeByStrings on ids; undefined when a merge leaves the vocabulary. */
  merge(pieces: number[]): number[] | undefined {
    const pairRanks: number[] = new Array(pieces.length - 1);
    const mergedIds: number[] = new Array(pieces.length - 1);
    const look = (i: number): boolean => {
      const slot = this.slotOf(pieces[i]!, pieces[i + 1]!);
      const rank = this.rank[slot]!;
      if (rank === OFF_VOCABULARY) return false;
      pairRanks[i] = rank === NO_MERGE ? Infinity : rank;
      mergedIds[i] = this.merged[slot]!;
      return true;
    };
    for (let i = 0; i < pieces.length - 1; i++) if (!look(i)) return undefined;
    for (let best = lowest(pairRanks); best >= 0; best = lowest(pairRanks)) {
      pieces[best] = mergedIds[best]!;
      pieces.splice(best + 1, 1);
      pairRanks.splice(best, 1);
      mergedIds.splice(best, 1);
      if (best > 0 && !look(best - 1)) return undefined;
      if (best < pairRanks.length && !look(best)) return undefined;
    }
    return pieces;
  }

  /** The slot of the pair (a, b), ranked from the library's tables the first time it is met. */
  private slotOf(a: number, b: number): number {
    const mask = this.left.length - 1;
    let slot = pairHash(a, b, mask);
    while (this.left[slot] !== -1) {
      if (this.left[slot] === a && this.right[slot] === b) return slot;
      slot = (slot + 1) & mask;
    }
    if (this.count >= this.maxPairs) {
      // Starts over, as the word memo does (MemoMap): a pair still in use is ranked again when next met.
      this.allocate(FIRST_SLOTS);
      return this.slotOf(a, b);
    }
    this.left[slot] = a;
    this.right[slot] = b;
    const [rank, merged] = this.rankByStrings(a, b);
    this.rank[slot] = rank;
    this.merged[slot] = merged;
    this.count += 1;
    if (2 * this.count > this.left.length) {
      this.grow();
      return this.slotOf(a, b);
    }
    return slot;
  }

  private rankByStrings(a: number, b: number): [rank: number, merged: number] {
    const left = this.vocab[a]!;
    const right = this.vocab[b]!;
    const rank = this.ranks.get(rankKey([left, right]));
    if (rank === undefined) return [NO_MERGE, -1];
    const joined = left + right;
    const merged = this.ids.get(joined);
    return merged === undefined || this.vocab[merged] !== joined ? [OFF_VOCABULARY, -1] : [rank, merged];
  }

  private grow(): void {
    const old = { left: this.left, right: this.right, rank: this.rank, merged: this.merged, count: this.count };
    this.allocate(2 * old.left.length);
    this.count = old.count;
    const mask = this.left.length - 1;
    for (let i = 0; i < old.left.length; i++) {
      if (old.left[i] === -1) continue;
      let slot = pairHash(old.left[i]!, old.right[i]!, mask);
      while (this.left[slot] !== -1) slot = (slot + 1) & mask;
      this.left[slot] = old.left[i]!;
      this.right[slot] = old.right[i]!;
      this.rank[slot] = old.rank[i]!;
      this.merged[slot] = old.merged[i]!;
    }
  }
}
