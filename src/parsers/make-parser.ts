/** Builds a FunctionCallParser from one format function over MarkedText, giving it both the text and token paths. */
import type { FunctionCallParser, ParseOptions, ParseResult, TokenVocab } from "./types.js";
import { delimiterPattern, markLiterals, markTokens, type MarkedText } from "./marked-text.js";

export function makeParser(
  format: string,
  delimiters: readonly string[],
  parseMarked: (mt: MarkedText, opts: ParseOptions) => ParseResult,
): FunctionCallParser {
  const pattern = delimiterPattern(delimiters);
  return {
    format,
    parse: (text: string, opts: ParseOptions = {}) => parseMarked(markLiterals(text, pattern), opts),
    parseTokens: (ids: readonly number[], vocab: TokenVocab, opts: ParseOptions = {}) =>
      parseMarked(markTokens(ids, vocab, delimiters), opts),
  };
}
