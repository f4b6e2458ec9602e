/**
 * Runs of JSON call objects: separated by `;` (Llama 3's `<|python_tag|>{...}; {...}`) or in a JSON array (Mistral),
 * read one value at a time so a malformed object is reported and skipped while the ones after it still parse.
 */
import type { ParseError, ParseOptions } from "./types.js";
import { callFromJsonValue, truncatedError, type CallOutcome } from "./call-object.js";
import { scanJson, skipWhitespace, type MarkedText } from "./marked-text.js";

export interface SequenceRead {
  outcomes: CallOutcome[];
  /** Where the reading stopped: what follows is normal text or the next delimiter. */
  end: number;
}

/** A value that did not close before `end`: truncated at the end of the output, else cut by a delimiter. */
export function unfinishedValue(text: string, from: number, end: number): ParseError {
  const raw = text.slice(from, end);
  const NON_SPACE = /\S/g;
  NON_SPACE.lastIndex = end;
  if (!NON_SPACE.test(text)) return truncatedError(raw);
  return { kind: "malformed_json", message: "the call's JSON is interrupted by a delimiter", raw: raw.trim() };
}

export function readJsonCallSequence(
  mt: MarkedText,
  start: number,
  opts: ParseOptions,
  separators: readonly string[] = [";"],
): SequenceRead {
  const { text } = mt;
  const outcomes: CallOutcome[] = [];
  let pos = skipWhitespace(text, start);
  for (;;) {
    const scan = scanJson(mt, pos);
    if (scan.status === "absent") break;
    if (scan.status === "incomplete") {
      outcomes.push(unfinishedValue(text, pos, scan.end));
      return { outcomes, end: scan.end };
    }
    const raw = text.slice(pos, scan.end);
    outcomes.push(
      scan.status === "complete"
        ? callFromJsonValue(scan.value, raw, opts)
        : { kind: "malformed_json", message: scan.message, raw },
    );
    pos = scan.end;
    const next = skipWhitespace(text, pos);
    const sep = separators.find((s) => text.startsWith(s, next));
    if (sep === undefined) break;
    pos = skipWhitespace(text, next + sep.length);
  }
  return { outcomes, end: pos };
}

/**
 * A JSON array of call objects, element by element: a malformed element is reported and the rest still parse, and
 * an array cut off by the end of output keeps the calls completed before the cut.
 */
export function readJsonCallArray(mt: MarkedText, start: number, opts: ParseOptions): SequenceRead {
  const { text } = mt;
  const outcomes: CallOutcome[] = [];
  const whole = scanJson(mt, start);
  const arrayEnd = whole.status === "absent" ? start + 1 : whole.end;
  let pos = skipWhitespace(text, start + 1);
  for (;;) {
    if (pos >= arrayEnd) {
      // The array never closed. Finished calls stand (the model may just have dropped the `]`), unless the engine
      // cut the output or nothing parsed at all.
      if (outcomes.length === 0 || opts.truncated === true) outcomes.push(unfinishedValue(text, start, arrayEnd));
      return { outcomes, end: arrayEnd };
    }
    if (text[pos] === "]") return { outcomes, end: pos + 1 };
    const scan = scanJson(mt, pos);
    if (scan.status === "incomplete") {
      outcomes.push(unfinishedValue(text, pos, scan.end));
      return { outcomes, end: scan.end };
    }
    if (scan.status === "absent") {
      outcomes.push({ kind: "malformed_json", message: "expected a JSON call object", raw: text.slice(pos, arrayEnd) });
      return { outcomes, end: arrayEnd };
    }
    const raw = text.slice(pos, scan.end);
    outcomes.push(
      scan.status === "complete"
        ? callFromJsonValue(scan.value, raw, opts)
        : { kind: "malformed_json", message: scan.message, raw },
    );
    pos = skipWhitespace(text, scan.end);
    if (text[pos] === ",") pos = skipWhitespace(text, pos + 1);
    else if (text[pos] !== "]" && pos < arrayEnd) {
      outcomes.push({ kind: "malformed_json", message: "expected ',' or ']'", raw: text.slice(pos, arrayEnd) });
      return { outcomes, end: arrayEnd };
    }
  }
}
