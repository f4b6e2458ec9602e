/**
 * `auto`: picks a format from the chat template and the tokenizer's special tokens. Each rule looks for the
 * delimiter the format is built on, either among the tokens or written in the template's tool instructions; the most
 * specific formats are tried first, because several templates mention more than one marker.
 */
import { InputError } from "../errors.js";
import { CALL_BEGIN, CALLS_BEGIN } from "./deepseekv3.js";
import { CHANNEL, CONSTRAIN } from "./gpt-oss.js";
import { PYTHON_TAG } from "./llama3.js";
import { TOOL_CALLS } from "./mistral.js";
import { PYTHON_START } from "./pythonic.js";
import { TOOL_CALL_OPEN } from "./tool-call-tags.js";

export type ConcreteFormat = "qwen25" | "hermes" | "llama3" | "mistral" | "deepseekv3" | "pythonic" | "gpt-oss";

interface Rule {
  format: ConcreteFormat;
  matches(template: string, tokens: ReadonlySet<string>): boolean;
}

const RULES: Rule[] = [
  // gpt-oss (harmony): no other format has channels; its templates write `<|channel|>` and `<|constrain|>`.
  {
    format: "gpt-oss",
    matches: (t, tokens) => tokens.has(CHANNEL) || tokens.has(CONSTRAIN) || t.includes(CHANNEL),
  },
  {
    format: "deepseekv3",
    matches: (t, tokens) => tokens.has(CALLS_BEGIN) || tokens.has(CALL_BEGIN) || t.includes(CALLS_BEGIN),
  },
  { format: "mistral", matches: (t, tokens) => tokens.has(TOOL_CALLS) || t.includes(TOOL_CALLS) },
  // Llama 4 templates describe calls as `[func_name1(params_name1=params_value1, ...)]`.
  {
    format: "pythonic",
    matches: (t, tokens) => tokens.has(PYTHON_START) || /\[func_name\d*\(/.test(t) || t.includes(PYTHON_START),
  },
  // Llama 3.1/3.2 templates ask for `{"name": function name, "parameters": ...}` and know <|python_tag|>.
  {
    format: "llama3",
    matches: (t, tokens) => tokens.has(PYTHON_TAG) || t.includes(PYTHON_TAG) || /"parameters": dictionary/.test(t),
  },
  // Qwen 2.5 / Qwen3 write the block with a newline on each side of the JSON; other Hermes-style templates may not.
  {
    format: "qwen25",
    matches: (t) => /<tool_call>\\n\{/.test(t) || /<tool_call>\n\{/.test(t),
  },
  { format: "hermes", matches: (t, tokens) => tokens.has(TOOL_CALL_OPEN) || t.includes(TOOL_CALL_OPEN) },
];

/** The format for a model, or an InputError naming the formats to choose from by hand. */
export function detectParserFormat(chatTemplate: string, specialTokens: Iterable<string>): ConcreteFormat {
  const tokens = new Set(specialTokens);
  const rule = RULES.find((r) => r.matches(chatTemplate, tokens));
  if (rule === undefined) {
    throw new InputError("could not tell the function-call format from the chat template and special tokens", {
      hint: `choose one explicitly: ${RULES.map((r) => r.format).join(", ")}`,
    });
  }
  return rule.format;
}
