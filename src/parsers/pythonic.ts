/**
 * Pythonic calls (Llama 4 and others): `[get_weather(city='Paris'), get_time(tz='CET')]`, optionally wrapped in
 * `<|python_start|>` ... `<|python_end|>`.
 */
import type { ParseOptions, ParseResult } from "./types.js";
import { ResultBuilder } from "./call-object.js";
import { nextMarker, textWithoutMarkers, type MarkedText } from "./marked-text.js";
import { readPythonCallList } from "./python-calls.js";

export const PYTHON_START = "<|python_start|>";
export const PYTHON_END = "<|python_end|>";
export const PYTHONIC_DELIMITERS = [PYTHON_START, PYTHON_END] as const;

/** A list whose first element is a call: `[name(`. */
const CALL_LIST_START = /\[\s*[A-Za-z_][\w.]*\s*\(/g;

export function parsePythonic(mt: MarkedText, opts: ParseOptions): ParseResult {
  const { text } = mt;
  const out = new ResultBuilder();
  out.hasCallMarker = nextMarker(mt, 0, [PYTHON_START]) !== undefined;
  let cursor = 0;
  for (;;) {
    CALL_LIST_START.lastIndex = cursor;
    const match = CALL_LIST_START.exec(text);
    if (match === null) break;
    const start = match.index;
    // Inside a string of a trusted python_start section a list never spans the closing marker.
    const limit = nextMarker(mt, start, [PYTHON_END])?.start ?? text.length;
    out.hasCallMarker = true;
    out.addText(textWithoutMarkers(mt, cursor, start));
    const read = readPythonCallList(text, start, limit, opts);
    out.add(...read.outcomes);
    cursor = Math.max(read.end, start + 1);
  }
  out.addText(textWithoutMarkers(mt, cursor, text.length));
  return out.build();
}
