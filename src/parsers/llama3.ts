/**
 * Llama 3.1 / 3.2 JSON calls: `<|python_tag|>{"name": ..., "parameters": {...}}`, several joined by `;`, or the same
 * objects with no tag when the output starts with `{"name"`.
 */
import type { ParseOptions, ParseResult } from "./types.js";
import { ResultBuilder } from "./call-object.js";
import { readJsonCallSequence } from "./json-sequence.js";
import { nextMarker, segmentEnd, type MarkedText } from "./marked-text.js";

export const PYTHON_TAG = "<|python_tag|>";
export const LLAMA3_DELIMITERS = [PYTHON_TAG] as const;

/** A tag-less output counts as calls only when it opens with a `name` key, so a plain JSON answer stays text. */
const BARE_CALL_START = /^\s*\{\s*"name"\s*:/;

export function parseLlama3(mt: MarkedText, opts: ParseOptions): ParseResult {
  const { text } = mt;
  const out = new ResultBuilder();
  let cursor = 0;
  const firstTag = nextMarker(mt, 0, [PYTHON_TAG]);
  const bare = BARE_CALL_START.test(firstTag ? text.slice(0, firstTag.start) : text);
  if (bare) {
    out.hasCallMarker = true;
    const read = readJsonCallSequence(mt, 0, opts);
    out.add(...read.outcomes);
    cursor = read.end;
  }
  for (;;) {
    const tag = nextMarker(mt, cursor, [PYTHON_TAG]);
    if (tag === undefined) break;
    out.hasCallMarker = true;
    out.addText(text.slice(cursor, tag.start));
    const read = readJsonCallSequence(mt, tag.end, opts);
    if (read.outcomes.length === 0) {
      // Llama also uses the tag for code-interpreter text; that is not a JSON call, keep it visible.
      const raw = text.slice(tag.end, segmentEnd(mt, tag.end)).trim();
      out.add({ kind: "invalid_call", message: "<|python_tag|> is not followed by a JSON call", raw });
    }
    out.add(...read.outcomes);
    cursor = read.end;
  }
  out.addText(text.slice(cursor));
  return out.build();
}
