/**
 * gpt-oss (OpenAI's harmony format). The output is a run of messages, each
 * `[<|start|>ROLE]<|channel|>CHANNEL [to=RECIPIENT] [<|constrain|>json]<|message|>BODY` closed by `<|end|>`,
 * `<|call|>` or `<|return|>`. A message addressed to a recipient (`to=functions.NAME`, in the role or the channel
 * header) is a call whose body is the JSON arguments; `analysis` messages are reasoning and stay out of normalText;
 * `final` and `commentary` messages (preambles), and text outside any message, are normal text. The generation prompt
 * ends with `<|start|>assistant`, so the first message of an output usually opens at `<|channel|>`.
 */
import type { ParseOptions, ParseResult } from "./types.js";
import { ResultBuilder, makeCall, truncatedError, type CallOutcome } from "./call-object.js";
import { parseJson } from "./json-scan.js";
import { markerAt, nextMarker, scanJson, skipWhitespace, textWithoutMarkers, type MarkedText, type Marker } from "./marked-text.js";

export const START = "<|start|>";
export const CHANNEL = "<|channel|>";
export const MESSAGE = "<|message|>";
export const CONSTRAIN = "<|constrain|>";
export const END = "<|end|>";
export const CALL = "<|call|>";
export const RETURN = "<|return|>";
export const GPT_OSS_DELIMITERS = [START, CHANNEL, MESSAGE, CONSTRAIN, END, CALL, RETURN] as const;

const OPENERS = [START, CHANNEL, MESSAGE];
const CLOSERS = [END, CALL, RETURN];
/** Where a message body ends: its closing token, or (unclosed) the next message's header. */
const BODY_STOPS = [END, CALL, RETURN, START, CHANNEL];

/** `to=functions.get_weather`: the recipient runs to whitespace or the next token. */
const RECIPIENT = /\bto=([^\s<]+)/;

interface Header {
  /** `analysis`, `commentary`, `final`, or "" when the message has no channel. */
  channel: string;
  /** The function name (the recipient's last dot-separated part), when the message is addressed to one. */
  name?: string;
  /** Offset of the body (just after `<|message|>`), or undefined when the header never reached one. */
  body?: number;
  /** Where the header stopped when it did not reach `<|message|>`. */
  stop: number;
  /** Start of the call's raw text: just after the opening token. */
  rawStart: number;
}

export function parseGptOss(mt: MarkedText, opts: ParseOptions): ParseResult {
  const out = new ResultBuilder();
  let cursor = 0;
  for (;;) {
    const open = nextMarker(mt, cursor, OPENERS);
    if (open === undefined) break;
    out.addText(textWithoutMarkers(mt, cursor, open.start));
    const header = readHeader(mt, open);
    if (header.name !== undefined) out.hasCallMarker = true;
    cursor = header.body === undefined ? unfinishedHeader(mt, header, out) : readBody(mt, header, opts, out);
  }
  out.addText(textWithoutMarkers(mt, cursor, mt.text.length));
  return out.build();
}

/** The header from its opening token to `<|message|>`; it stops early at a token that cannot be inside a header. */
function readHeader(mt: MarkedText, open: Marker): Header {
  if (open.token === MESSAGE) return { channel: "", body: open.end, stop: open.end, rawStart: open.end };
  const stop = nextMarker(mt, open.end, [START, MESSAGE, END, CALL, RETURN]);
  const end = stop?.start ?? mt.text.length;
  const text = mt.text.slice(open.start, end);
  const channelMarker = open.token === CHANNEL ? open : nextMarker(mt, open.end, [CHANNEL]);
  let channel = "";
  if (channelMarker !== undefined && channelMarker.start < end) {
    channel = (/^\s*([^\s<]*)/.exec(mt.text.slice(channelMarker.end, end))?.[1] ?? "").toLowerCase();
  }
  const header: Header = { channel, stop: end, rawStart: open.end };
  const recipient = RECIPIENT.exec(text)?.[1];
  // `to=assistant` marks a tool's reply to the model, not a call.
  if (recipient !== undefined && recipient !== "assistant") header.name = recipient.slice(recipient.lastIndexOf(".") + 1);
  if (stop?.token === MESSAGE) header.body = stop.end;
  return header;
}

/** A header cut off before `<|message|>`: a call header is an error; any other header is structure and is dropped. */
function unfinishedHeader(mt: MarkedText, header: Header, out: ResultBuilder): number {
  if (header.name !== undefined) {
    const raw = mt.text.slice(header.rawStart, header.stop);
    if (header.stop === mt.text.length) out.add(truncatedError(raw, header.name));
    else out.add({ kind: "invalid_call", message: "the call's header is not followed by <|message|>", raw, name: header.name });
  }
  return header.stop;
}

/** A message body: a call when the header names a recipient; otherwise text, except analysis (reasoning). */
function readBody(mt: MarkedText, header: Header, opts: ParseOptions, out: ResultBuilder): number {
  const body = header.body as number;
  if (header.name !== undefined) {
    const read = readCall(mt, header, body, opts);
    out.add(read.outcome);
    return read.end;
  }
  const stop = nextMarker(mt, body, BODY_STOPS);
  if (header.channel !== "analysis") out.addText(textWithoutMarkers(mt, body, stop?.start ?? mt.text.length));
  if (stop === undefined) return mt.text.length;
  return CLOSERS.includes(stop.token) ? stop.end : stop.start;
}

/** The call's JSON arguments, read to their end before looking for `<|call|>`, so a `<|call|>` in a string is text. */
function readCall(mt: MarkedText, header: Header, body: number, opts: ParseOptions): { outcome: CallOutcome; end: number } {
  const { text } = mt;
  const name = header.name as string;
  const pos = skipWhitespace(text, body);
  if (name === "") {
    const stop = nextMarker(mt, pos, BODY_STOPS);
    const raw = text.slice(header.rawStart, stop?.start ?? text.length);
    return { outcome: { kind: "missing_name", message: "the recipient names no function", raw }, end: stop?.start ?? text.length };
  }
  const scan = scanJson(mt, pos);
  if (scan.status === "absent") return readNonJsonBody(mt, header, pos, opts);
  const raw = text.slice(header.rawStart, scan.end);
  if (scan.status === "incomplete") {
    if (scan.end >= text.length) return { outcome: truncatedError(raw, name), end: scan.end };
    const message = "the arguments are not closed before the next harmony token";
    return { outcome: { kind: "malformed_json", message, raw, name }, end: scan.end };
  }
  const after = skipWhitespace(text, scan.end);
  const closer = markerAt(mt, after, CLOSERS);
  if (closer === undefined && after < text.length) {
    const stop = nextMarker(mt, after, BODY_STOPS)?.start ?? text.length;
    const message = "text after the arguments, before <|call|>";
    return { outcome: { kind: "malformed_json", message, raw: text.slice(header.rawStart, stop), name }, end: stop };
  }
  const end = closer?.end ?? text.length;
  if (scan.status === "malformed") return { outcome: { kind: "malformed_json", message: scan.message, raw, name }, end };
  if (closer === undefined && opts.truncated === true) return { outcome: truncatedError(raw, name), end };
  return { outcome: makeCall(name, scan.value, raw, opts), end };
}

/** A body that is not a JSON object or array: empty (no arguments), a JSON scalar, or not JSON at all. */
function readNonJsonBody(mt: MarkedText, header: Header, pos: number, opts: ParseOptions): { outcome: CallOutcome; end: number } {
  const { text } = mt;
  const name = header.name as string;
  const stop = nextMarker(mt, pos, BODY_STOPS);
  const stopAt = stop?.start ?? text.length;
  const raw = text.slice(header.rawStart, stopAt);
  if (stop === undefined) return { outcome: truncatedError(raw, name), end: text.length };
  if (!CLOSERS.includes(stop.token)) {
    return { outcome: { kind: "malformed_json", message: "call not closed with <|call|>", raw, name }, end: stopAt };
  }
  const argsText = text.slice(pos, stopAt).trim();
  if (argsText === "") return { outcome: makeCall(name, {}, raw, opts), end: stop.end };
  const args = parseJson(argsText);
  if (!args.ok) return { outcome: { kind: "malformed_json", message: args.message, raw, name }, end: stop.end };
  return { outcome: makeCall(name, args.value, raw, opts), end: stop.end };
}
