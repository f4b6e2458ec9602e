/**
 * Turning a decoded call value into a ParsedCall or a ParseError, and collecting a ParseResult. Shared by every
 * format, so the rules (arguments as a JSON string are decoded, unknown names are errors, never silent drops) hold
 * everywhere.
 */
import type { ParseError, ParseOptions, ParseResult, ParsedCall } from "./types.js";
import { parseJson } from "./json-scan.js";

export type CallOutcome = ParsedCall | ParseError;

export function isParseError(outcome: CallOutcome): outcome is ParseError {
  return "kind" in outcome;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Arguments as an object. A string is decoded as JSON (SGLang double-encodes it instead); null, undefined and the
 * empty string mean no arguments.
 */
export function decodeArguments(
  value: unknown,
  raw: string,
  name: string,
): { ok: true; args: Record<string, unknown> } | { ok: false; error: ParseError } {
  if (value === undefined || value === null) return { ok: true, args: {} };
  if (isPlainObject(value)) return { ok: true, args: value };
  if (typeof value === "string") {
    if (value.trim() === "") return { ok: true, args: {} };
    const decoded = parseJson(value);
    if (!decoded.ok) {
      return {
        ok: false,
        error: { kind: "malformed_json", message: `arguments string is not valid JSON: ${decoded.message}`, raw, name },
      };
    }
    if (isPlainObject(decoded.value)) return { ok: true, args: decoded.value };
    return {
      ok: false,
      error: { kind: "invalid_arguments", message: "arguments string does not hold a JSON object", raw, name },
    };
  }
  const shape = Array.isArray(value) ? "an array" : `a ${typeof value}`;
  return { ok: false, error: { kind: "invalid_arguments", message: `arguments must be an object, got ${shape}`, raw, name } };
}

/** An unknown_tool error when a tool list was given and does not hold `name`. */
export function unknownTool(name: string, raw: string, opts: ParseOptions): ParseError | undefined {
  if (opts.tools === undefined || opts.tools.includes(name)) return undefined;
  const offered = opts.tools.length > 0 ? opts.tools.join(", ") : "none";
  return { kind: "unknown_tool", message: `unknown tool '${name}' (offered: ${offered})`, raw, name };
}

/** A name and its arguments value, checked against the tool list. */
export function makeCall(name: string, argsValue: unknown, raw: string, opts: ParseOptions): CallOutcome {
  const unknown = unknownTool(name, raw, opts);
  if (unknown) return unknown;
  const args = decodeArguments(argsValue, raw, name);
  return args.ok ? { name, arguments: args.args, raw } : args.error;
}

/**
 * `{"name": ..., "arguments": {...}}`. `parameters` (Llama's key) is read when `arguments` is absent or null.
 */
export function callFromJsonValue(value: unknown, raw: string, opts: ParseOptions): CallOutcome {
  if (!isPlainObject(value)) {
    return { kind: "invalid_call", message: "a call must be a JSON object with a name", raw };
  }
  const name = value.name;
  if (typeof name !== "string" || name === "") {
    return { kind: "missing_name", message: "the call has no string 'name'", raw };
  }
  const argsValue = value.arguments ?? value.parameters;
  return makeCall(name, argsValue, raw, opts);
}

/** JSON.stringify, or `fallback` for values too deeply nested to serialise without overflowing the stack. */
function stringifyOr(value: unknown, fallback: string): string {
  try {
    return JSON.stringify(value);
  } catch {
    return fallback;
  }
}

/** One JSON call or a JSON array of calls: one outcome per element, so one bad element spoils nothing else. */
export function callsFromJsonText(body: string, opts: ParseOptions): CallOutcome[] {
  const raw = body.trim();
  if (raw === "") return [{ kind: "invalid_call", message: "empty call body", raw }];
  const parsed = parseJson(raw);
  if (!parsed.ok) return [{ kind: "malformed_json", message: parsed.message, raw }];
  if (Array.isArray(parsed.value)) {
    return parsed.value.map((element) => callFromJsonValue(element, stringifyOr(element, raw), opts));
  }
  return [callFromJsonValue(parsed.value, raw, opts)];
}

/** Collects text pieces, calls and errors in order. */
export class ResultBuilder {
  private readonly pieces: string[] = [];
  readonly calls: ParsedCall[] = [];
  readonly errors: ParseError[] = [];
  hasCallMarker = false;

  addText(text: string): void {
    const trimmed = text.trim();
    if (trimmed !== "") this.pieces.push(trimmed);
  }

  add(...outcomes: CallOutcome[]): void {
    for (const outcome of outcomes) {
      if (isParseError(outcome)) this.errors.push(outcome);
      else this.calls.push(outcome);
    }
  }

  build(): ParseResult {
    return {
      normalText: this.pieces.join("\n"),
      calls: this.calls,
      errors: this.errors,
      hasCallMarker: this.hasCallMarker,
    };
  }
}

export function truncatedError(raw: string, name?: string): ParseError {
  const error: ParseError = { kind: "truncated", message: "the output ended inside this call", raw: raw.trim() };
  if (name !== undefined) error.name = name;
  return error;
}
