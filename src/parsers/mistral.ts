/**
 * Mistral: `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]` (canonical), and the compact
 * `[TOOL_CALLS]name[ARGS]{...}` repeated once per call (newer Mistral templates).
 */
import type { ParseOptions, ParseResult } from "./types.js";
import { ResultBuilder, makeCall, truncatedError } from "./call-object.js";
import { readJsonCallArray, readJsonCallSequence, unfinishedValue, type SequenceRead } from "./json-sequence.js";
import { isMarkerAt, nextMarker, scanJson, skipWhitespace, type MarkedText } from "./marked-text.js";

export const TOOL_CALLS = "[TOOL_CALLS]";
export const ARGS = "[ARGS]";
export const MISTRAL_DELIMITERS = [TOOL_CALLS, ARGS] as const;

export function parseMistral(mt: MarkedText, opts: ParseOptions): ParseResult {
  const { text } = mt;
  const out = new ResultBuilder();
  let cursor = 0;
  for (;;) {
    const tag = nextMarker(mt, cursor, [TOOL_CALLS]);
    if (tag === undefined) break;
    out.hasCallMarker = true;
    out.addText(text.slice(cursor, tag.start));
    const pos = skipWhitespace(text, tag.end);
    // `[TOOL_CALLS]` itself starts with `[`: a delimiter right here is not an array.
    const opensJson = (text[pos] === "[" || text[pos] === "{") && !isMarkerAt(mt, pos);
    let read: SequenceRead;
    if (opensJson && text[pos] === "[") read = readJsonCallArray(mt, pos, opts);
    else if (opensJson) read = readJsonCallSequence(mt, pos, opts, [","]);
    else read = readCompactCall(mt, tag.end, opts);
    out.add(...read.outcomes);
    cursor = read.end;
  }
  out.addText(text.slice(cursor));
  return out.build();
}

/** `name[ARGS]{...}` right after a `[TOOL_CALLS]` that ends at `start`. */
function readCompactCall(mt: MarkedText, start: number, opts: ParseOptions): SequenceRead {
  const { text } = mt;
  const args = nextMarker(mt, start, [ARGS]);
  const nextTag = nextMarker(mt, start, [TOOL_CALLS]);
  if (args === undefined || (nextTag !== undefined && nextTag.start < args.start)) {
    const end = nextTag?.start ?? text.length;
    const raw = text.slice(start, end);
    if (end === text.length && /^\s*[\w.-]*\s*$/.test(raw)) return { outcomes: [truncatedError(raw)], end };
    return { outcomes: [{ kind: "malformed_json", message: "expected a JSON array or name[ARGS]{...}", raw }], end };
  }
  const name = text.slice(start, args.start).trim();
  const jsonStart = skipWhitespace(text, args.end);
  const scan = scanJson(mt, jsonStart);
  if (scan.status === "incomplete") {
    const error = unfinishedValue(text, start, scan.end);
    error.name = name;
    return { outcomes: [error], end: scan.end };
  }
  if (scan.status === "absent") {
    if (jsonStart >= text.length) return { outcomes: [truncatedError(text.slice(start), name)], end: text.length };
    const message = "[ARGS] is not followed by a JSON object";
    return { outcomes: [{ kind: "malformed_json", message, raw: text.slice(start, jsonStart), name }], end: jsonStart };
  }
  const raw = text.slice(start, scan.end);
  if (name === "") return { outcomes: [{ kind: "missing_name", message: "no name before [ARGS]", raw }], end: scan.end };
  if (scan.status === "malformed") {
    return { outcomes: [{ kind: "malformed_json", message: scan.message, raw, name }], end: scan.end };
  }
  return { outcomes: [makeCall(name, scan.value, raw, opts)], end: scan.end };
}
