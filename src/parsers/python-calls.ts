/**
 * A small reader for the Python call lists of the pythonic format: `[f(a=1, b='x'), g(c=[1, -2], d={'k': None})]`.
 * Values are Python literals: strings, numbers (negative ones too), True/False/None, lists, tuples (as arrays) and
 * dicts. Nothing is evaluated. A bad call is reported and skipped; the calls around it still parse.
 */
import type { ParseOptions } from "./types.js";
import { makeCall, truncatedError, type CallOutcome } from "./call-object.js";

/** The reader ran into the end of the available text. */
class EndOfInput extends Error {}
/** The text is not a Python literal / call where one was expected. */
class SyntaxProblem extends Error {
  constructor(
    message: string,
    readonly kind: "malformed_json" | "invalid_arguments" = "malformed_json",
  ) {
    super(message);
  }
}

const IDENT = /[A-Za-z_][A-Za-z0-9_.]*/y;
const NUMBER = /[-+]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][-+]?\d+)?/y;
const ESCAPES: Record<string, string> = { n: "\n", t: "\t", r: "\r", b: "\b", f: "\f", v: "\v", "0": "\0", a: "\x07" };

/** Deeper literals are refused rather than overflowing the stack: no tool takes 256 levels of nesting. */
const MAX_DEPTH = 256;

class Reader {
  pos: number;
  private depth = 0;
  constructor(
    readonly text: string,
    start: number,
    readonly limit: number,
  ) {
    this.pos = start;
  }

  peek(): string {
    if (this.pos >= this.limit) throw new EndOfInput();
    return this.text[this.pos] as string;
  }

  skipSpace(): void {
    while (this.pos < this.limit && /\s/.test(this.text[this.pos] as string)) this.pos++;
  }

  expect(c: string): void {
    this.skipSpace();
    if (this.peek() !== c) throw new SyntaxProblem(`expected '${c}' at offset ${this.pos}`);
    this.pos++;
  }

  sticky(re: RegExp): string | undefined {
    re.lastIndex = this.pos;
    const m = re.exec(this.text);
    if (m === null || m.index + m[0].length > this.limit) return undefined;
    this.pos += m[0].length;
    return m[0];
  }

  identifier(): string {
    this.skipSpace();
    this.peek();
    const name = this.sticky(IDENT);
    if (name === undefined) throw new SyntaxProblem(`expected a name at offset ${this.pos}`);
    return name;
  }

  value(): unknown {
    this.skipSpace();
    const c = this.peek();
    if (c === "'" || c === '"') return this.string();
    if (c === "[") return this.sequence("[", "]");
    if (c === "(") return this.sequence("(", ")");
    if (c === "{") return this.dict();
    const num = this.sticky(NUMBER);
    if (num !== undefined) {
      if (this.pos >= this.limit) throw new EndOfInput();
      return Number(num.replace(/_/g, ""));
    }
    const word = this.sticky(IDENT);
    if (word === "True") return true;
    if (word === "False") return false;
    if (word === "None") return null;
    if (word !== undefined) {
      if (this.pos >= this.limit) throw new EndOfInput();
      throw new SyntaxProblem(`'${word}' is not a literal (names and expressions are not evaluated)`, "invalid_arguments");
    }
    throw new SyntaxProblem(`unexpected '${c}' at offset ${this.pos}`);
  }

  string(): string {
    const quote = this.peek();
    const triple = this.text.startsWith(quote.repeat(3), this.pos);
    const close = triple ? quote.repeat(3) : quote;
    this.pos += close.length;
    let out = "";
    for (;;) {
      const c = this.peek();
      if (this.text.startsWith(close, this.pos)) {
        this.pos += close.length;
        return out;
      }
      if (c === "\\") {
        this.pos++;
        const e = this.peek();
        const hexLength = e === "x" ? 2 : e === "u" ? 4 : e === "U" ? 8 : 0;
        if (hexLength > 0) {
          const hex = this.text.slice(this.pos + 1, this.pos + 1 + hexLength);
          if (this.pos + 1 + hexLength > this.limit) throw new EndOfInput();
          if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== hexLength) throw new SyntaxProblem(`bad \\${e} escape`);
          const code = parseInt(hex, 16);
          if (code > 0x10ffff) throw new SyntaxProblem(`bad \\${e} escape`);
          out += String.fromCodePoint(code);
          this.pos += 1 + hexLength;
        } else {
          out += ESCAPES[e] ?? (e === "\n" ? "" : e);
          this.pos++;
        }
        continue;
      }
      if (c === "\n" && !triple) throw new SyntaxProblem("newline inside a string");
      out += c;
      this.pos++;
    }
  }

  /** Continues at `pos` after a failed call, with the nesting count of that call forgotten. */
  recoverAt(pos: number): void {
    this.pos = pos;
    this.depth = 0;
  }

  private enter(): void {
    if (++this.depth > MAX_DEPTH) throw new SyntaxProblem(`literal nested deeper than ${MAX_DEPTH} levels`);
  }

  sequence(open: string, close: string): unknown[] {
    this.expect(open);
    this.enter();
    const items: unknown[] = [];
    for (;;) {
      this.skipSpace();
      if (this.peek() === close) break;
      items.push(this.value());
      this.skipSpace();
      if (this.peek() === ",") this.pos++;
      else if (this.peek() !== close) throw new SyntaxProblem(`expected ',' or '${close}' at offset ${this.pos}`);
    }
    this.pos++;
    this.depth--;
    return items;
  }

  dict(): Record<string, unknown> {
    this.expect("{");
    this.enter();
    const out: Record<string, unknown> = {};
    for (;;) {
      this.skipSpace();
      if (this.peek() === "}") break;
      const key = this.value();
      if (typeof key !== "string" && typeof key !== "number" && typeof key !== "boolean" && key !== null) {
        throw new SyntaxProblem("dict keys must be strings or numbers");
      }
      this.expect(":");
      setOwn(out, String(key), this.value());
      this.skipSpace();
      if (this.peek() === ",") this.pos++;
      else if (this.peek() !== "}") throw new SyntaxProblem(`expected ',' or '}' at offset ${this.pos}`);
    }
    this.pos++;
    this.depth--;
    return out;
  }

  /** `name(k=v, ...)`, keyword arguments only. */
  call(): { name: string; args: Record<string, unknown> } {
    const name = this.identifier();
    this.expect("(");
    const args: Record<string, unknown> = {};
    for (;;) {
      this.skipSpace();
      if (this.peek() === ")") break;
      const save = this.pos;
      const key = this.sticky(IDENT);
      this.skipSpace();
      if (key === undefined || this.peek() !== "=" || this.text[this.pos + 1] === "=") {
        this.pos = save;
        this.value();
        throw new SyntaxProblem("positional arguments are not supported; use keyword arguments", "invalid_arguments");
      }
      this.pos++;
      setOwn(args, key, this.value());
      this.skipSpace();
      if (this.peek() === ",") this.pos++;
      else if (this.peek() !== ")") throw new SyntaxProblem(`expected ',' or ')' at offset ${this.pos}`);
    }
    this.pos++;
    return { name, args };
  }
}

/**
 * From `start`, the end of the bracketed span opened there (Python strings skipped), or undefined when the text runs
 * out first. Used to step over a call that failed to parse. A closer that does not match the innermost opener closes
 * the nearest opener it does match, as if the ones in between were forgotten: `f(x=[1, 2)` ends at its `)`.
 */
function bracketSpanEnd(text: string, start: number, limit: number): number | undefined {
  const pairs: Record<string, string> = { ")": "(", "]": "[", "}": "{" };
  const stack: string[] = [];
  let quote: string | undefined;
  for (let i = start; i < limit; i++) {
    const c = text[i] as string;
    if (quote !== undefined) {
      if (c === "\\") i++;
      else if (c === quote) quote = undefined;
      continue;
    }
    if (c === "'" || c === '"') quote = c;
    else if ("([{".includes(c)) stack.push(c);
    else if (c in pairs) {
      const at = stack.lastIndexOf(pairs[c] as string);
      if (at >= 0) stack.length = at;
      if (stack.length === 0) return i + 1;
    }
  }
  return undefined;
}

/** Reads `[call, call, ...]` starting at the `[` at `start`. */
export function readPythonCallList(
  text: string,
  start: number,
  limit: number,
  opts: ParseOptions,
): { outcomes: CallOutcome[]; end: number } {
  const outcomes: CallOutcome[] = [];
  const reader = new Reader(text, start + 1, limit);
  for (;;) {
    reader.skipSpace();
    if (reader.pos >= limit) {
      if (outcomes.length === 0 || opts.truncated === true) outcomes.push(truncatedError(text.slice(start, limit)));
      return { outcomes, end: limit };
    }
    if (text[reader.pos] === "]") return { outcomes, end: reader.pos + 1 };
    const callStart = reader.pos;
    try {
      const { name, args } = reader.call();
      outcomes.push(makeCall(name, args, text.slice(callStart, reader.pos), opts));
    } catch (err) {
      if (!(err instanceof EndOfInput) && !(err instanceof SyntaxProblem)) throw err;
      const nameMatch = /^[A-Za-z_][\w.]*/.exec(text.slice(callStart, limit));
      const callEnd = bracketSpanEnd(text, callStart, limit);
      if (err instanceof EndOfInput || callEnd === undefined) {
        outcomes.push(truncatedError(text.slice(callStart, limit), nameMatch?.[0]));
        return { outcomes, end: limit };
      }
      const error: CallOutcome = { kind: err.kind, message: err.message, raw: text.slice(callStart, callEnd) };
      if (nameMatch !== null) error.name = nameMatch[0];
      outcomes.push(error);
      reader.recoverAt(callEnd);
    }
    reader.skipSpace();
    if (reader.pos >= limit) continue;
    if (text[reader.pos] === ",") reader.pos++;
    else if (text[reader.pos] !== "]") {
      outcomes.push({ kind: "malformed_json", message: "expected ',' or ']' between calls", raw: text.slice(reader.pos, limit) });
      return { outcomes, end: limit };
    }
  }
}

/**
 * Sets an own, enumerable property even for the name `__proto__`, which plain assignment would take as the object's
 * prototype (losing the argument). JSON.parse already behaves this way; the Python-literal parser must too.
 */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}
