/**
 * Function-call parsers for the formats of SGLang's function_call package, with the differences documented in
 * docs/parsers.md. Errors are data; parsers never throw on model output.
 */
import { InputError } from "../errors.js";
import type { FunctionCallParser } from "./types.js";
import { makeParser } from "./make-parser.js";
import { TOOL_CALL_DELIMITERS, parseToolCallTags } from "./tool-call-tags.js";
import { LLAMA3_DELIMITERS, parseLlama3 } from "./llama3.js";
import { MISTRAL_DELIMITERS, parseMistral } from "./mistral.js";
import { DEEPSEEKV3_DELIMITERS, parseDeepseekV3 } from "./deepseekv3.js";
import { PYTHONIC_DELIMITERS, parsePythonic } from "./pythonic.js";
import { GPT_OSS_DELIMITERS, parseGptOss } from "./gpt-oss.js";
import { detectParserFormat, type ConcreteFormat } from "./detect.js";

export type {
  FunctionCallParser,
  ParseError,
  ParseErrorKind,
  ParseOptions,
  ParseResult,
  ParsedCall,
  TokenVocab,
} from "./types.js";
export { detectParserFormat, type ConcreteFormat } from "./detect.js";

const PARSERS: Record<ConcreteFormat, FunctionCallParser> = {
  qwen25: makeParser("qwen25", TOOL_CALL_DELIMITERS, parseToolCallTags),
  hermes: makeParser("hermes", TOOL_CALL_DELIMITERS, parseToolCallTags),
  llama3: makeParser("llama3", LLAMA3_DELIMITERS, parseLlama3),
  mistral: makeParser("mistral", MISTRAL_DELIMITERS, parseMistral),
  deepseekv3: makeParser("deepseekv3", DEEPSEEKV3_DELIMITERS, parseDeepseekV3),
  pythonic: makeParser("pythonic", PYTHONIC_DELIMITERS, parsePythonic),
  "gpt-oss": makeParser("gpt-oss", GPT_OSS_DELIMITERS, parseGptOss),
};

/** SGLang's alternative names. */
const ALIASES: Record<string, ConcreteFormat> = { qwen: "qwen25" };

export type ParserFormat = ConcreteFormat | "auto";

/** Every name getParser accepts, for help texts and usage errors. */
export const PARSER_FORMATS: readonly string[] = [...Object.keys(PARSERS), "auto", ...Object.keys(ALIASES)];

export function isParserFormat(name: string): boolean {
  return PARSER_FORMATS.includes(name);
}

/**
 * The parser for a format name. `auto` needs the model's chat template and special tokens (tokenizer.json
 * `added_tokens`) and picks with detectParserFormat.
 */
export function getParser(
  format: string,
  model: { chatTemplate?: string; specialTokens?: Iterable<string> } = {},
): FunctionCallParser {
  if (format === "auto") {
    if (model.chatTemplate === undefined && model.specialTokens === undefined) {
      throw new InputError("the 'auto' function-call format needs the model's chat template or special tokens", {
        hint: `pass them, or choose a format: ${Object.keys(PARSERS).join(", ")}`,
      });
    }
    return PARSERS[detectParserFormat(model.chatTemplate ?? "", model.specialTokens ?? [])];
  }
  const concrete = ALIASES[format] ?? (format in PARSERS ? (format as ConcreteFormat) : undefined);
  if (concrete === undefined) {
    throw new InputError(`unknown function-call format '${format}'`, {
      hint: `valid formats: ${PARSER_FORMATS.join(", ")}`,
    });
  }
  return PARSERS[concrete];
}
