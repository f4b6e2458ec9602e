/**
 * A safe calculator: a small recursive-descent parser over arithmetic, never `eval`. Grammar (Python-like):
 *   expr   := term (("+" | "-") term)*
 *   term   := unary (("*" | "/" | "//" | "%") unary)*
 *   unary  := ("+" | "-") unary | power
 *   power  := atom ("**" unary)?          (right-associative, binds tighter than unary minus on its left: -2**2 = -4)
 *   atom   := number | name | name "(" args ")" | "(" expr ")"
 * Errors come back as data (`{ok: false, error}`) because a bad expression is an expected outcome.
 */
import { BaseTool } from "./base-tool.js";
import { pyFloatRepr } from "./python-repr.js";
import type { ToolContext, ToolExecuteResult } from "./types.js";

export const MAX_EXPRESSION_LENGTH = 1000;
const MAX_DEPTH = 64;

export type CalcResult = { ok: true; value: number } | { ok: false; error: string };

const FUNCTIONS: Record<string, { arity: [number, number]; fn: (...xs: number[]) => number }> = {
  sqrt: { arity: [1, 1], fn: (x) => Math.sqrt(x) },
  abs: { arity: [1, 1], fn: (x) => Math.abs(x) },
  round: { arity: [1, 2], fn: (x, d = 0) => Math.round(x * 10 ** d) / 10 ** d },
  floor: { arity: [1, 1], fn: (x) => Math.floor(x) },
  ceil: { arity: [1, 1], fn: (x) => Math.ceil(x) },
  min: { arity: [1, 64], fn: (...xs) => Math.min(...xs) },
  max: { arity: [1, 64], fn: (...xs) => Math.max(...xs) },
  log: { arity: [1, 1], fn: (x) => Math.log(x) },
  exp: { arity: [1, 1], fn: (x) => Math.exp(x) },
};
const CONSTANTS: Record<string, number> = { pi: Math.PI, e: Math.E };

type Token = { kind: "num"; value: number; pos: number } | { kind: "name"; value: string; pos: number } | { kind: "op"; value: string; pos: number };

class CalcError extends Error {}

function tokenize(src: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const ch = src[i] as string;
    if (/\s/.test(ch)) {
      i++;
      continue;
    }
    const num = /^(?:\d+(?:_\d+)*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?/.exec(src.slice(i));
    if (num) {
      tokens.push({ kind: "num", value: Number(num[0].replaceAll("_", "")), pos: i });
      i += num[0].length;
      continue;
    }
    const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i));
    if (name) {
      tokens.push({ kind: "name", value: name[0], pos: i });
      i += name[0].length;
      continue;
    }
    const op = ["**", "//", "+", "-", "*", "/", "%", "(", ")", ","].find((o) => src.startsWith(o, i));
    if (op) {
      tokens.push({ kind: "op", value: op, pos: i });
      i += op.length;
      continue;
    }
    if (ch === "^") throw new CalcError(`unsupported operator '^' at position ${i}; use ** for powers`);
    throw new CalcError(`unexpected character ${JSON.stringify(ch)} at position ${i}`);
  }
  return tokens;
}

class Parser {
  private index = 0;
  private depth = 0;
  constructor(private readonly tokens: Token[]) {}

  parse(): number {
    if (this.tokens.length === 0) throw new CalcError("empty expression");
    const value = this.expr();
    const extra = this.tokens[this.index];
    if (extra) throw new CalcError(`unexpected ${JSON.stringify(String(extra.value))} at position ${extra.pos}`);
    return value;
  }

  private peekOp(...ops: string[]): string | undefined {
    const t = this.tokens[this.index];
    return t && t.kind === "op" && ops.includes(t.value) ? t.value : undefined;
  }

  private enter(): void {
    if (++this.depth > MAX_DEPTH) throw new CalcError("expression nested too deeply");
  }

  private expr(): number {
    this.enter();
    let value = this.term();
    for (let op = this.peekOp("+", "-"); op; op = this.peekOp("+", "-")) {
      this.index++;
      const rhs = this.term();
      value = op === "+" ? value + rhs : value - rhs;
    }
    this.depth--;
    return value;
  }

  private term(): number {
    let value = this.unary();
    for (let op = this.peekOp("*", "/", "//", "%"); op; op = this.peekOp("*", "/", "//", "%")) {
      this.index++;
      const rhs = this.unary();
      if (op === "*") value *= rhs;
      else if (rhs === 0) throw new CalcError(op === "%" ? "modulo by zero" : "division by zero");
      else if (op === "/") value /= rhs;
      else if (op === "//") value = Math.floor(value / rhs);
      else value = value - rhs * Math.floor(value / rhs); // Python's % takes the divisor's sign.
    }
    return value;
  }

  private unary(): number {
    const op = this.peekOp("+", "-");
    if (op) {
      this.index++;
      this.enter();
      const value = this.unary();
      this.depth--;
      return op === "-" ? -value : value;
    }
    return this.power();
  }

  private power(): number {
    const base = this.atom();
    if (this.peekOp("**")) {
      this.index++;
      this.enter();
      const exponent = this.unary();
      this.depth--;
      if (base === 0 && exponent < 0) throw new CalcError("zero to a negative power");
      return base ** exponent;
    }
    return base;
  }

  private atom(): number {
    const t = this.tokens[this.index];
    if (!t) throw new CalcError("unexpected end of expression");
    this.index++;
    if (t.kind === "num") return t.value;
    if (t.kind === "name") {
      if (this.peekOp("(")) return this.call(t.value, t.pos);
      const constant = Object.hasOwn(CONSTANTS, t.value) ? CONSTANTS[t.value] : undefined;
      if (constant === undefined) throw new CalcError(`unknown name '${t.value}' at position ${t.pos}`);
      return constant;
    }
    if (t.value === "(") {
      const value = this.expr();
      if (!this.peekOp(")")) throw new CalcError(`missing ')' for '(' at position ${t.pos}`);
      this.index++;
      return value;
    }
    throw new CalcError(`unexpected '${t.value}' at position ${t.pos}`);
  }

  private call(name: string, pos: number): number {
    // Own keys only: names like "constructor" or "toString" must not reach Object.prototype.
    const fn = Object.hasOwn(FUNCTIONS, name) ? FUNCTIONS[name] : undefined;
    if (!fn) throw new CalcError(`unknown function '${name}' at position ${pos}`);
    this.index++; // "("
    const args: number[] = [];
    if (!this.peekOp(")")) {
      args.push(this.expr());
      while (this.peekOp(",")) {
        this.index++;
        args.push(this.expr());
      }
    }
    if (!this.peekOp(")")) throw new CalcError(`missing ')' after arguments of ${name}`);
    this.index++;
    const [lo, hi] = fn.arity;
    if (args.length < lo || args.length > hi) throw new CalcError(`${name}() takes ${lo === hi ? lo : `${lo} to ${hi}`} argument(s), got ${args.length}`);
    return fn.fn(...args);
  }
}

export function evaluateExpression(expression: string): CalcResult {
  if (expression.length > MAX_EXPRESSION_LENGTH) return { ok: false, error: `expression longer than ${MAX_EXPRESSION_LENGTH} characters` };
  try {
    const value = new Parser(tokenize(expression)).parse();
    if (!Number.isFinite(value)) return { ok: false, error: "result is not a finite number" };
    return { ok: true, value };
  } catch (err) {
    if (err instanceof CalcError) return { ok: false, error: err.message };
    throw err;
  }
}

/** Integral results print without a decimal point ("42"), others as Python floats ("0.5", "1e+20"). */
export function formatCalcValue(value: number): string {
  return Number.isInteger(value) && Math.abs(value) < 1e16 ? String(value) : pyFloatRepr(value);
}

/** The `calculator` tool: parameter `expression`, text = the result or `Error: ...`, step reward 0.0. */
export class CalculatorTool extends BaseTool {
  override async execute(_instanceId: string, parameters: Record<string, unknown>, _ctx: ToolContext): Promise<ToolExecuteResult> {
    const expression = parameters["expression"];
    if (typeof expression !== "string") {
      return { response: { text: "Error: parameter 'expression' must be a string" }, reward: 0.0, metrics: { ok: false } };
    }
    const result = evaluateExpression(expression);
    const text = result.ok ? formatCalcValue(result.value) : `Error: ${result.error}`;
    return { response: { text }, reward: 0.0, metrics: { ok: result.ok } };
  }
}
