/**
 * Encoding that splits the text at added tokens and encodes (and caches) the pieces between them separately.
 *
 * Why it is exact: a Hugging Face tokenizer extracts added tokens before it normalizes or pre-tokenizes, so the text
 * on either side of one is encoded independently anyway: encode(a + T + b) = encode(a) + [T] + encode(b). Two things
 * can break that, and a tokenizer showing either is not split (encodeSegmented is then a plain encode):
 * - an added token that strips neighbouring whitespace, matches single words only, or is matched after
 *   normalisation (lstrip, rstrip, single_word, normalized): its match depends on text across a boundary;
 * - a Metaspace / Prepend step (SentencePiece-style tokenizers), which treats the first piece of the text
 *   differently from the others.
 *
 * Why it pays: a rollout renders the same pieces again and again. The system prompt with the tool schemas is the
 * same for every prompt of a run, a user question for the n samples and every re-render of their conversation,
 * the generation prompt for every turn. With pieces cached, only new text reaches the tokenizer.
 */
import type { MemoMap } from "../memo-map.js";

interface AddedTokenSpec {
  content: string;
  lstrip?: boolean;
  rstrip?: boolean;
  single_word?: boolean;
  normalized?: boolean;
}

/** The regex that finds added tokens in raw text, or undefined when splitting would not be exact. */
export function addedTokenSplitter(tokenizerJson: {
  added_tokens: readonly AddedTokenSpec[];
  normalizer?: unknown;
  pre_tokenizer?: unknown;
}): RegExp | undefined {
  const tokens = tokenizerJson.added_tokens;
  if (tokens.length === 0) return undefined;
  if (tokens.some((t) => t.lstrip || t.rstrip || t.single_word || t.normalized)) return undefined;
  const steps = JSON.stringify([tokenizerJson.normalizer ?? null, tokenizerJson.pre_tokenizer ?? null]);
  if (/"type":"(Metaspace|Prepend)"|"add_prefix_space":true/.test(steps)) return undefined;
  // Longest first, so the alternation finds the leftmost-longest match, as the tokenizer's matcher does.
  const alternatives = [...new Set(tokens.map((t) => t.content))]
    .filter((content) => content.length > 0)
    .sort((a, b) => b.length - a.length)
    .map((content) => content.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(alternatives.join("|"), "g");
}

/** Pieces longer than this are encoded every time: they are documents, not prompt parts. */
const MAX_CACHED_PIECE_CHARS = 65_536;

/**
 * encode(text), piece by piece: the stretches between added tokens go through `encodePiece` (or the cache) and
 * each added token becomes its id. Without a splitter the whole text is one piece. With `remember` false, pieces
 * found in the cache are used but new ones are not added: for a text whose new pieces will not recur.
 */
export function encodeSegmented(
  text: string,
  splitter: RegExp | undefined,
  addedId: (content: string) => number,
  encodePiece: (piece: string) => number[],
  cache: MemoMap<string, number[]>,
  remember = true,
): number[] {
  const cachedPiece = (piece: string): number[] => {
    let ids = cache.get(piece);
    if (!ids) {
      ids = encodePiece(piece);
      if (remember && piece.length <= MAX_CACHED_PIECE_CHARS) cache.set(piece, ids);
    }
    return ids;
  };
  if (!splitter) return cachedPiece(text).slice();
  const out: number[] = [];
  // A loop, not push(...ids): a long piece has more ids than a call may take arguments.
  const append = (ids: readonly number[]) => {
    for (const id of ids) out.push(id);
  };
  let from = 0;
  splitter.lastIndex = 0;
  for (let match = splitter.exec(text); match; match = splitter.exec(text)) {
    if (match.index > from) append(cachedPiece(text.slice(from, match.index)));
    out.push(addedId(match[0]));
    from = match.index + match[0].length;
  }
  if (from < text.length) append(cachedPiece(text.slice(from)));
  return out;
}
