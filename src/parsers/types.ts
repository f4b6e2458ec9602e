/**
 * The shared vocabulary of the function-call parsers: what a parse returns, and the minimal view of a tokenizer the
 * token-level path needs. Errors are data: a rollout feeds them back to the model instead of dropping the call.
 */

/** One call the model made, with its arguments decoded to a JSON object. */
export interface ParsedCall {
  name: string;
  arguments: Record<string, unknown>;
  /** The call's own source text (without the format's delimiters), for logs and error feedback. */
  raw: string;
}

export type ParseErrorKind =
  /** The call's JSON (or Python literal, for pythonic) does not parse. */
  | "malformed_json"
  /** A tool list was given and the name is not in it. */
  | "unknown_tool"
  /** The output ended inside a call, or `truncated: true` was passed and the last call was never closed. */
  | "truncated"
  /** The arguments are not an object (an array, a number, a string that is not a JSON object, positional args). */
  | "invalid_arguments"
  /** The call has no string `name`. */
  | "missing_name"
  /** The call is not shaped like a call at all (a JSON value that is not an object, a block with no body). */
  | "invalid_call";

export interface ParseError {
  kind: ParseErrorKind;
  message: string;
  raw: string;
  /** The function name, when the parser got that far. */
  name?: string;
}

export interface ParseResult {
  /** Text outside the calls: before, between and after, each piece trimmed, joined with "\n". */
  normalText: string;
  calls: ParsedCall[];
  errors: ParseError[];
  /** True when the format's call marker appeared, whether or not a call parsed. */
  hasCallMarker: boolean;
}

export interface ParseOptions {
  /** Names of the tools offered to the model; a call to any other name becomes an `unknown_tool` error. */
  tools?: readonly string[];
  /** The engine stopped the output (finish reason `length` or `abort`): an unclosed last call is `truncated`. */
  truncated?: boolean;
}

/**
 * The few tokenizer operations the token-level path needs. The chat module's tokenizer satisfies it; tests build one
 * straight from a tokenizer.json.
 */
export interface TokenVocab {
  decode(ids: number[]): string;
  idToToken(id: number): string | undefined;
  tokenToId(token: string): number | undefined;
  /**
   * True for atomic added tokens (tokenizer.json `added_tokens`), whether flagged `special` or not: Qwen's
   * `<tool_call>` is an added token with `special: false`, and it is exactly the token we must tell apart from the
   * same characters spelled out by ordinary BPE pieces.
   */
  isSpecialId(id: number): boolean;
}

export interface FunctionCallParser {
  /** The format name, e.g. "qwen25". */
  readonly format: string;
  /** Text-only fallback: every literal occurrence of a delimiter counts as a delimiter (outside a call's JSON). */
  parse(text: string, opts?: ParseOptions): ParseResult;
  /** Token-level: delimiters are recognised only as special-token ids, never as the same text in ordinary pieces. */
  parseTokens(ids: readonly number[], vocab: TokenVocab, opts?: ParseOptions): ParseResult;
}
