/**
 * `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks: Qwen 2.5 / Qwen3 (`qwen25`, which puts a newline
 * on each side of the JSON) and Hermes (`hermes`). Both are parsed the same, whitespace-tolerant way.
 */
import type { ParseOptions, ParseResult } from "./types.js";
import { ResultBuilder, callsFromJsonText, truncatedError, type CallOutcome } from "./call-object.js";
import { markerAt, nextMarker, scanJson, skipWhitespace, type MarkedText, type Marker } from "./marked-text.js";

export const TOOL_CALL_OPEN = "<tool_call>";
export const TOOL_CALL_CLOSE = "</tool_call>";
export const TOOL_CALL_DELIMITERS = [TOOL_CALL_OPEN, TOOL_CALL_CLOSE] as const;

export function parseToolCallTags(mt: MarkedText, opts: ParseOptions): ParseResult {
  const { text } = mt;
  const out = new ResultBuilder();
  let cursor = 0;
  for (;;) {
    const open = nextMarker(mt, cursor, [TOOL_CALL_OPEN]);
    if (open === undefined) break;
    out.hasCallMarker = true;
    out.addText(text.slice(cursor, open.start));
    const bodyStart = open.end;
    const jsonStart = skipWhitespace(text, bodyStart);
    const scan = scanJson(mt, jsonStart);

    // The close is the marker right after a complete JSON value (this skips a `</tool_call>` inside a string), or the
    // one an unfinished value ran into, else the first close marker; a new open marker before that one means this
    // block was never closed.
    let close: Marker | undefined;
    if (scan.status === "complete" || scan.status === "malformed") {
      close = markerAt(mt, skipWhitespace(text, scan.end), [TOOL_CALL_CLOSE]);
    } else if (scan.status === "incomplete") {
      close = markerAt(mt, scan.end, [TOOL_CALL_CLOSE]);
    }
    if (close === undefined) {
      const fallback = nextMarker(mt, bodyStart, [TOOL_CALL_CLOSE]);
      const nextOpen = nextMarker(mt, bodyStart, [TOOL_CALL_OPEN]);
      if (fallback === undefined || (nextOpen !== undefined && nextOpen.start < fallback.start)) {
        const end = nextOpen?.start ?? text.length;
        out.add(...unclosedBlock(text.slice(bodyStart, end), scan.status, end === text.length, opts));
        cursor = end;
        continue;
      }
      close = fallback;
    }
    out.add(...callsFromJsonText(text.slice(bodyStart, close.start), opts));
    cursor = close.end;
  }
  out.addText(text.slice(cursor));
  return out.build();
}

/**
 * A block with no close marker. At the end of the output: truncated when the engine said so or the JSON stopped
 * midway; a complete JSON value is accepted, as SGLang's hermes parser does. Before another block: accepted when
 * complete, otherwise malformed.
 */
function unclosedBlock(body: string, scanStatus: string, atEnd: boolean, opts: ParseOptions): CallOutcome[] {
  const endsHere = opts.truncated === true || scanStatus === "incomplete" || body.trim() === "";
  if (atEnd && endsHere) return [truncatedError(body)];
  if (scanStatus === "incomplete") {
    return [{ kind: "malformed_json", message: "call not closed before the next <tool_call>", raw: body.trim() }];
  }
  return callsFromJsonText(body, opts);
}
