/**
 * How each format spells a call, written from the formats' documentation (../shared/reference/sglang.md §4), so the
 * parser tests can state one behaviour once and check it for every format. Also a character-level fake vocab for the
 * token path: every delimiter is one special id, every other character one ordinary id.
 */
import type { TokenVocab } from "../src/parsers/index.js";

export const DS = {
  callsBegin: "<｜tool▁calls▁begin｜>",
  callsEnd: "<｜tool▁calls▁end｜>",
  callBegin: "<｜tool▁call▁begin｜>",
  sep: "<｜tool▁sep｜>",
  callEnd: "<｜tool▁call▁end｜>",
};

export const HARMONY = {
  start: "<|start|>",
  channel: "<|channel|>",
  message: "<|message|>",
  constrain: "<|constrain|>",
  end: "<|end|>",
  call: "<|call|>",
  return: "<|return|>",
};

/** A gpt-oss call message, as the model writes it after the prompt's `<|start|>assistant`. */
function harmonyCall(name: string, args: string): string {
  const H = HARMONY;
  return `${H.start}assistant${H.channel}commentary to=functions.${name} ${H.constrain}json${H.message}${args}${H.call}`;
}

/** A Python literal for a JSON value (pythonic arguments). JSON string escapes are valid Python escapes. */
export function pyLiteral(value: unknown): string {
  if (value === null) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number" || typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(pyLiteral).join(", ")}]`;
  const entries = Object.entries(value as Record<string, unknown>);
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${pyLiteral(v)}`).join(", ")}}`;
}

export interface Spelling {
  format: "qwen25" | "hermes" | "llama3" | "mistral" | "deepseekv3" | "pythonic" | "gpt-oss";
  /** Delimiters that are special tokens in the model's tokenizer. */
  delimiters: string[];
  /** One call from a name and its arguments given as JSON text (which may be malformed or a JSON string). */
  call(name: string, argsJson: string): string;
  /** The whole tool-call part of a message for several calls. */
  wrap(calls: string[]): string;
  /** A call whose arguments do not parse, in this format's terms. */
  malformed(name: string): string;
}

export const SPELLINGS: Spelling[] = [
  {
    format: "qwen25",
    delimiters: ["<tool_call>", "</tool_call>"],
    call: (name, args) => `<tool_call>\n{"name": ${JSON.stringify(name)}, "arguments": ${args}}\n</tool_call>`,
    wrap: (calls) => calls.join("\n"),
    malformed: (name) => `<tool_call>\n{"name": ${JSON.stringify(name)}, "arguments": {"x": }}\n</tool_call>`,
  },
  {
    format: "hermes",
    delimiters: ["<tool_call>", "</tool_call>"],
    call: (name, args) => `<tool_call>{"name": ${JSON.stringify(name)}, "arguments": ${args}}</tool_call>`,
    wrap: (calls) => calls.join(""),
    malformed: (name) => `<tool_call>{"name": ${JSON.stringify(name)}, "arguments": {'x': 1}}</tool_call>`,
  },
  {
    format: "llama3",
    delimiters: ["<|python_tag|>"],
    call: (name, args) => `{"name": ${JSON.stringify(name)}, "parameters": ${args}}`,
    wrap: (calls) => `<|python_tag|>${calls.join("; ")}`,
    malformed: (name) => `{"name": ${JSON.stringify(name)}, "parameters": {"x": 1,}}`,
  },
  {
    format: "mistral",
    delimiters: ["[TOOL_CALLS]", "[ARGS]"],
    call: (name, args) => `{"name": ${JSON.stringify(name)}, "arguments": ${args}}`,
    wrap: (calls) => `[TOOL_CALLS] [${calls.join(", ")}]`,
    malformed: (name) => `{"name": ${JSON.stringify(name)}, "arguments": {"x" 1}}`,
  },
  {
    format: "deepseekv3",
    delimiters: Object.values(DS),
    call: (name, args) => `${DS.callBegin}function${DS.sep}${name}\n\`\`\`json\n${args}\n\`\`\`${DS.callEnd}`,
    wrap: (calls) => `${DS.callsBegin}${calls.join("\n")}${DS.callsEnd}`,
    malformed: (name) => `${DS.callBegin}function${DS.sep}${name}\n\`\`\`json\n{"x": [1, 2}\n\`\`\`${DS.callEnd}`,
  },
  {
    format: "pythonic",
    delimiters: ["<|python_start|>", "<|python_end|>"],
    call: (name, args) => {
      const parsed = JSON.parse(args) as Record<string, unknown>;
      return `${name}(${Object.entries(parsed).map(([k, v]) => `${k}=${pyLiteral(v)}`).join(", ")})`;
    },
    wrap: (calls) => `[${calls.join(", ")}]`,
    malformed: (name) => `${name}(x=[1, 2)`,
  },
  {
    format: "gpt-oss",
    delimiters: Object.values(HARMONY),
    call: harmonyCall,
    // The reasoning comes first and is not normal text.
    wrap: (calls) => `${HARMONY.channel}analysis${HARMONY.message}I should call the tools.${HARMONY.end}${calls.join("")}`,
    malformed: (name) => harmonyCall(name, '{"x": [1, 2}'),
  },
];

/**
 * A fake vocab with one id per character (10_000 + code point) and one special id per delimiter (0, 1, ...).
 * `encode` marks delimiters as special ids, except inside `plain(...)` spans, which stay ordinary characters: that is
 * how a model spells a delimiter inside an argument string.
 */
export class CharVocab implements TokenVocab {
  private readonly specials: string[];
  constructor(specials: string[]) {
    this.specials = [...specials].sort((a, b) => b.length - a.length);
  }
  static PLAIN_OPEN = "\u0001";
  static PLAIN_CLOSE = "\u0002";
  static plain(text: string): string {
    return `${CharVocab.PLAIN_OPEN}${text}${CharVocab.PLAIN_CLOSE}`;
  }
  encode(text: string): number[] {
    const ids: number[] = [];
    let plain = false;
    for (let i = 0; i < text.length; ) {
      if (text[i] === CharVocab.PLAIN_OPEN || text[i] === CharVocab.PLAIN_CLOSE) {
        plain = text[i] === CharVocab.PLAIN_OPEN;
        i++;
        continue;
      }
      const special = plain ? undefined : this.specials.find((s) => text.startsWith(s, i));
      if (special !== undefined) {
        ids.push(this.specials.indexOf(special));
        i += special.length;
      } else {
        const cp = text.codePointAt(i) as number;
        ids.push(10_000 + cp);
        i += cp > 0xffff ? 2 : 1;
      }
    }
    return ids;
  }
  decode(ids: number[]): string {
    return ids.map((id) => this.idToToken(id) ?? "").join("");
  }
  idToToken(id: number): string | undefined {
    if (id >= 10_000 && id <= 10_000 + 0x10ffff) return String.fromCodePoint(id - 10_000);
    return this.specials[id];
  }
  tokenToId(token: string): number | undefined {
    const i = this.specials.indexOf(token);
    return i >= 0 ? i : undefined;
  }
  isSpecialId(id: number): boolean {
    return id >= 0 && id < this.specials.length;
  }
}

/** Removes the plain-span markers, giving the text the model output reads as. */
export function unplain(text: string): string {
  return text.replaceAll(CharVocab.PLAIN_OPEN, "").replaceAll(CharVocab.PLAIN_CLOSE, "");
}
