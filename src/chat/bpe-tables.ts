/**
 * Builds the @huggingface/tokenizers Tokenizer of a BPE tokenizer.json with its two big tables made here instead of by
 * the library.
 *
 * Why: the library's BPE constructor is the largest part of a rollout's start-up (issue 20 asks for ≤ 1 s of CPU to the
 * first request). For Qwen3's 151,643 tokens and 151,387 merges it spends about 100 ms on `new Map(Object.entries(vocab))`
 * and 110 ms on a `JSON.stringify` per merge for its rank keys, out of about 1 s. A `for…in` over the vocab and a rank
 * key written by concatenation where no character needs escaping build the same Maps in half the time.
 *
 * How it stays the library's tokenizer: the library builds everything from a copy of tokenizer.json whose model has an
 * empty vocab and merge list; its constructor then writes the added tokens into those empty tables. The real tables
 * are built here, the constructor's entries are copied over them (so added tokens win, as in the library, whatever
 * the constructor wrote), and they are installed on the model. `bpe_ranks` keys are exactly `JSON.stringify([a, b])`,
 * the string the library's encoder looks up. The merge list itself is not kept (the ranks hold it, in order).
 * test/chat-bpe-tables.test.ts checks every table entry for entry against the library's own build. Any other model
 * type, any merge not a pair, or a library whose BPE model lacks the fields set here goes through the library's own
 * constructor unchanged.
 */
import { Tokenizer } from "@huggingface/tokenizers";

type TokenizerJsonLike = { model?: unknown } & Record<string, unknown>;

interface BpeModelConfig {
  type: "BPE";
  vocab: Record<string, number>;
  merges: Array<[string, string]> | string[];
  unk_token?: string | null;
}

/** What the library's BPE model keeps; checked to exist before anything is installed. */
export interface BpeModelInternals {
  tokens_to_ids: Map<string, number>;
  vocab: string[];
  merges: Array<[string, string]>;
  bpe_ranks: Map<string, number>;
  unk_token_id: number | undefined;
}

/** Characters JSON.stringify escapes in a string, and the two line separators some engines did. */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\u2028\u2029]|[\ud800-\udfff]/;

function bpeModelOf(json: TokenizerJsonLike): BpeModelConfig | undefined {
  const model = json.model as Partial<BpeModelConfig> | undefined;
  if (model?.type !== "BPE" || typeof model.vocab !== "object" || model.vocab === null || !Array.isArray(model.merges)) {
    return undefined;
  }
  return model as BpeModelConfig;
}

function isInternals(model: unknown): model is BpeModelInternals {
  const m = model as Partial<BpeModelInternals> | undefined;
  return m?.tokens_to_ids instanceof Map && Array.isArray(m.vocab) && Array.isArray(m.merges) && m.bpe_ranks instanceof Map;
}

/** The merges as pairs, as the library keeps them; undefined when one is neither a pair nor "a b". */
function mergePairs(merges: BpeModelConfig["merges"]): Array<[string, string]> | undefined {
  const pairs: Array<[string, string]> = new Array(merges.length);
  for (let i = 0; i < merges.length; i++) {
    const merge = merges[i];
    if (typeof merge === "string") {
      // The library's legacy form: split(" ", 2), which keeps only the first two parts.
      const [a, b] = merge.split(" ", 2);
      pairs[i] = [a!, b!];
    } else if (Array.isArray(merge) && merge.length === 2 && typeof merge[0] === "string" && typeof merge[1] === "string") {
      pairs[i] = merge;
    } else {
      return undefined;
    }
  }
  return pairs;
}

/** The library's rank key for a merge: JSON.stringify([a, b]), written directly when neither part needs escaping. */
export function rankKey(pair: [string, string]): string {
  const [a, b] = pair;
  // Joined, not concatenated: concatenation makes a tree of V8 "cons" strings (two to four nodes for a key of 13
  // characters or more), which a Map keeps as its key for the life of the process: for Qwen3's ranks 282,763 more
  // objects for every full collection to mark (3.8 MB; a loaded model's full collection 28-31 ms against 20-22).
  return NEEDS_ESCAPE.test(a) || NEEDS_ESCAPE.test(b) ? JSON.stringify(pair) : ['["', a, '","', b, '"]'].join("");
}

/** A Tokenizer for tokenizer.json and tokenizer_config.json, as `new Tokenizer(json, config)` builds it. */
export function buildTokenizer(json: TokenizerJsonLike, config: Record<string, unknown>): Tokenizer {
  const model = bpeModelOf(json);
  const merges = model && mergePairs(model.merges);
  if (!model || !merges) return new Tokenizer(json, config);
  const tokenizer = new Tokenizer({ ...json, model: { ...model, vocab: {}, merges: [] } }, config);
  const internals = (tokenizer as unknown as { model?: unknown }).model;
  if (!isInternals(internals)) return new Tokenizer(json, config);

  // The library's order: the vocab's Map and the id-indexed array built from it, then what its constructor wrote into
  // the empty tables (the added tokens) set over both, so an added token overrides a vocab entry's id as it does there.
  const tokensToIds = new Map<string, number>();
  for (const token in model.vocab) tokensToIds.set(token, model.vocab[token]!);
  const unkTokenId = model.unk_token == null ? undefined : tokensToIds.get(model.unk_token);
  const vocab: string[] = new Array(tokensToIds.size);
  for (const [token, id] of tokensToIds) vocab[id] = token;
  for (const [token, id] of internals.tokens_to_ids) tokensToIds.set(token, id);
  internals.vocab.forEach((token, id) => {
    vocab[id] = token;
  });
  const ranks = new Map<string, number>();
  for (let i = 0; i < merges.length; i++) ranks.set(rankKey(merges[i]!), i);

  internals.tokens_to_ids = tokensToIds;
  internals.vocab = vocab;
  // The library reads its merge list only in its constructor, to rank the merges: kept, the 151,387 pairs would be
  // that many arrays for the garbage collector to mark at every full collection, for the life of the process.
  internals.merges = [];
  internals.bpe_ranks = ranks;
  internals.unk_token_id = unkTokenId;
  return tokenizer;
}

/**
 * One past the largest id the tokenizer has, added tokens included: the largest value of `get_vocab(true)`, which
 * is its model's id-indexed vocab array's last index. Read as that array's length where the model keeps one, without
 * the 151k-entry Map get_vocab builds (about 18 ms of start-up for Qwen3).
 */
export function vocabSizeOf(tokenizer: Tokenizer): number {
  const vocab = (tokenizer as unknown as { model?: { vocab?: unknown } }).model?.vocab;
  if (Array.isArray(vocab)) return vocab.length;
  let maxId = -1;
  for (const id of tokenizer.get_vocab(true).values()) maxId = Math.max(maxId, id);
  return maxId + 1;
}
