/**
 * DeepSeek V3: `<｜tool▁calls▁begin｜>` then, per call,
 * `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>`, then
 * `<｜tool▁calls▁end｜>`. The bars are U+FF5C and `▁` is U+2581.
 */
import type { ParseOptions, ParseResult } from "./types.js";
import { ResultBuilder, makeCall, truncatedError, type CallOutcome } from "./call-object.js";
import { parseJson } from "./json-scan.js";
import { nextMarker, textWithoutMarkers, type MarkedText } from "./marked-text.js";

export const CALLS_BEGIN = "<｜tool▁calls▁begin｜>";
export const CALLS_END = "<｜tool▁calls▁end｜>";
export const CALL_BEGIN = "<｜tool▁call▁begin｜>";
export const CALL_SEP = "<｜tool▁sep｜>";
export const CALL_END = "<｜tool▁call▁end｜>";
export const END_OF_SENTENCE = "<｜end▁of▁sentence｜>";
export const DEEPSEEKV3_DELIMITERS = [CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_SEP, CALL_END, END_OF_SENTENCE] as const;

/** NAME, then the arguments fenced as ```json ... ``` (the fence is optional here). */
const FENCED_BODY = /^\s*([^\n`]*?)\s*\n?\s*```(?:json)?\s*\n?([\s\S]*?)\s*```\s*$/;
const UNFENCED_BODY = /^\s*([^\s{`]+)\s*([\s\S]*?)\s*$/;

export function parseDeepseekV3(mt: MarkedText, opts: ParseOptions): ParseResult {
  const { text } = mt;
  const out = new ResultBuilder();
  out.hasCallMarker = nextMarker(mt, 0, [CALLS_BEGIN, CALL_BEGIN]) !== undefined;
  let cursor = 0;
  for (;;) {
    const begin = nextMarker(mt, cursor, [CALL_BEGIN]);
    if (begin === undefined) break;
    out.addText(textWithoutMarkers(mt, cursor, begin.start));
    const end = nextMarker(mt, begin.end, [CALL_END]);
    const next = nextMarker(mt, begin.end, [CALL_BEGIN, CALLS_END]);
    if (end === undefined || (next !== undefined && next.start < end.start)) {
      const stop = next?.start ?? text.length;
      out.add(unclosedCall(mt, begin.end, stop, stop === text.length));
      cursor = stop;
      continue;
    }
    out.add(callFromBody(mt, begin.end, end.start, opts));
    cursor = end.end;
  }
  out.addText(textWithoutMarkers(mt, cursor, text.length));
  return out.build();
}

function splitBody(mt: MarkedText, from: number, to: number): { name: string; args: string } | undefined {
  const sep = nextMarker(mt, from, [CALL_SEP]);
  if (sep === undefined || sep.start >= to) return undefined;
  const rest = mt.text.slice(sep.end, to);
  // DeepSeek V3.1 writes NAME<｜tool▁sep｜>ARGS, with no `function` type and no fence: read that layout too.
  const before = mt.text.slice(from, sep.start).trim();
  if (before !== "function" && before !== "" && rest.trimStart().startsWith("{")) return { name: before, args: rest };
  const match = FENCED_BODY.exec(rest) ?? UNFENCED_BODY.exec(rest);
  if (match === null || !match[1]) return undefined;
  return { name: match[1], args: match[2] ?? "" };
}

function callFromBody(mt: MarkedText, from: number, to: number, opts: ParseOptions): CallOutcome {
  const raw = mt.text.slice(from, to);
  const parts = splitBody(mt, from, to);
  if (parts === undefined) {
    return { kind: "invalid_call", message: "expected function<｜tool▁sep｜>NAME then ```json ARGS```", raw };
  }
  const args = parts.args.trim() === "" ? { ok: true as const, value: {} } : parseJson(parts.args);
  if (!args.ok) return { kind: "malformed_json", message: args.message, raw, name: parts.name };
  return makeCall(parts.name, args.value, raw, opts);
}

function unclosedCall(mt: MarkedText, from: number, to: number, atEnd: boolean): CallOutcome {
  const raw = mt.text.slice(from, to);
  const sep = nextMarker(mt, from, [CALL_SEP]);
  const name = sep !== undefined && sep.start < to ? /^\s*([^\n`]+)/.exec(mt.text.slice(sep.end, to))?.[1] : undefined;
  if (atEnd) return truncatedError(raw, name?.trim());
  const error: CallOutcome = { kind: "malformed_json", message: "call not closed with <｜tool▁call▁end｜>", raw };
  if (name !== undefined) error.name = name.trim();
  return error;
}
