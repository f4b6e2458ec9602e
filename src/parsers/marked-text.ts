/**
 * Model output with its delimiters located. The text path finds delimiters as literal substrings (a fallback: the
 * same characters inside an argument string look identical). The token path finds them only where the engine sampled
 * the delimiter's own special-token id, so `<tool_call>` spelled out by ordinary BPE pieces stays plain text.
 * Both paths yield the same shape, so every format is written once.
 */
import type { TokenVocab } from "./types.js";
import { scanJsonValue, type JsonScan } from "./json-scan.js";

export interface Marker {
  token: string;
  start: number;
  end: number;
}

export interface MarkedText {
  text: string;
  /** Sorted by start, non-overlapping. */
  markers: Marker[];
  /** True when markers came from special-token ids: then no JSON value can run across a marker. */
  trusted: boolean;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** One regular expression matching any of the delimiters, longest first where they overlap. Build it once. */
export function delimiterPattern(delimiters: readonly string[]): RegExp | undefined {
  if (delimiters.length === 0) return undefined;
  const sorted = [...delimiters].sort((a, b) => b.length - a.length);
  return new RegExp(sorted.map(escapeRegExp).join("|"), "g");
}

/** Every literal occurrence of the delimiters (`pattern` from delimiterPattern). */
export function markLiterals(text: string, pattern: RegExp | undefined): MarkedText {
  const markers: Marker[] = [];
  if (pattern !== undefined) {
    for (const match of text.matchAll(pattern)) {
      const start = match.index;
      markers.push({ token: match[0], start, end: start + match[0].length });
    }
  }
  return { text, markers, trusted: false };
}

/**
 * Decodes ids run by run, splitting at the special ids whose token is one of the delimiters. Other special ids inside
 * the output (`<think>`, say) are decoded with their run, as the vocab's decode renders them; trailing ones are cut.
 */
export function markTokens(ids: readonly number[], vocab: TokenVocab, delimiters: readonly string[]): MarkedText {
  const wanted = new Set(delimiters);
  // The end-of-turn / EOS token the engine stops on is not part of the message: drop trailing specials that are not
  // delimiters, so `<|im_end|>` never shows up in normalText.
  let stop = ids.length;
  while (stop > 0) {
    const last = ids[stop - 1] as number;
    const token = vocab.isSpecialId(last) ? vocab.idToToken(last) : undefined;
    if (token === undefined || wanted.has(token)) break;
    stop--;
  }
  ids = ids.slice(0, stop);
  const markers: Marker[] = [];
  let text = "";
  let run: number[] = [];
  const flush = (): void => {
    if (run.length > 0) text += vocab.decode(run);
    run = [];
  };
  for (const id of ids) {
    const token = vocab.isSpecialId(id) ? vocab.idToToken(id) : undefined;
    if (token !== undefined && wanted.has(token)) {
      flush();
      markers.push({ token, start: text.length, end: text.length + token.length });
      text += token;
    } else {
      run.push(id);
    }
  }
  flush();
  return { text, markers, trusted: true };
}

/** Index of the first marker in `markers` starting at or after `from` (binary search). */
function firstIndexIn(markers: readonly Marker[], from: number): number {
  let lo = 0;
  let hi = markers.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((markers[mid] as Marker).start < from) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function firstIndexFrom(mt: MarkedText, from: number): number {
  return firstIndexIn(mt.markers, from);
}

/** The markers of each token, sorted, built once per MarkedText: outputs can hold thousands of markers. */
const byTokenCache = new WeakMap<MarkedText, Map<string, Marker[]>>();

function markersOf(mt: MarkedText, token: string): readonly Marker[] {
  let byToken = byTokenCache.get(mt);
  if (byToken === undefined) {
    byToken = new Map();
    for (const m of mt.markers) {
      const list = byToken.get(m.token);
      if (list === undefined) byToken.set(m.token, [m]);
      else list.push(m);
    }
    byTokenCache.set(mt, byToken);
  }
  return byToken.get(token) ?? [];
}

/** The first marker starting at or after `from` whose token is one of `tokens` (any token when omitted). */
export function nextMarker(mt: MarkedText, from: number, tokens?: readonly string[]): Marker | undefined {
  if (tokens === undefined) return mt.markers[firstIndexFrom(mt, from)];
  let best: Marker | undefined;
  for (const token of tokens) {
    const list = markersOf(mt, token);
    const m = list[firstIndexIn(list, from)];
    if (m !== undefined && (best === undefined || m.start < best.start)) best = m;
  }
  return best;
}

/** The marker that starts exactly at `pos` with one of `tokens`, if any. */
export function markerAt(mt: MarkedText, pos: number, tokens: readonly string[]): Marker | undefined {
  const m = mt.markers[firstIndexFrom(mt, pos)];
  return m !== undefined && m.start === pos && tokens.includes(m.token) ? m : undefined;
}

/** The JSON object or array starting at `pos`, stopping at delimiters that cannot belong to it. */
export function scanJson(mt: MarkedText, pos: number): JsonScan {
  let starts = startsCache.get(mt);
  if (starts === undefined) {
    starts = mt.markers.map((m) => m.start);
    startsCache.set(mt, starts);
  }
  return scanJsonValue(mt.text, pos, starts, mt.trusted);
}
const startsCache = new WeakMap<MarkedText, number[]>();

/** Where the text segment that starts at `from` ends: the next marker, or the end of the text. */
export function segmentEnd(mt: MarkedText, from: number): number {
  return nextMarker(mt, from)?.start ?? mt.text.length;
}

/** True when a marker starts exactly at `pos`. */
export function isMarkerAt(mt: MarkedText, pos: number): boolean {
  return mt.markers[firstIndexFrom(mt, pos)]?.start === pos;
}

export function skipWhitespace(text: string, pos: number): number {
  while (pos < text.length && /\s/.test(text[pos] as string)) pos++;
  return pos;
}

/** The text of [from, to) with every marker inside it cut out (wrapper tokens that carry no content). */
export function textWithoutMarkers(mt: MarkedText, from: number, to: number): string {
  let result = "";
  let pos = from;
  for (let i = firstIndexFrom(mt, from); i < mt.markers.length; i++) {
    const m = mt.markers[i] as Marker;
    if (m.start >= to) break;
    result += mt.text.slice(pos, m.start);
    pos = Math.min(m.end, to);
  }
  return result + mt.text.slice(pos, to);
}
