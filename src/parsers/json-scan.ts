/**
 * Finds where one JSON object or array ends, without parsing: bracket depth outside strings. This is what lets the
 * text path skip a `</tool_call>` that sits inside an argument string, and tells "the output stopped mid-value"
 * (incomplete) apart from "the value is wrong" (malformed).
 */
export type JsonScan =
  | { status: "complete"; end: number; value: unknown }
  | { status: "malformed"; end: number; message: string }
  /** The value did not close before `end`: the end of the text, or a delimiter that cannot be part of JSON. */
  | { status: "incomplete"; end: number }
  | { status: "absent" };

/**
 * Scans the value that starts at `start`. `stops` are the sorted start offsets of delimiters: the scan ends at one met
 * outside a string (no JSON value contains a bare delimiter), and at any one when `stopInStrings` (token-level
 * delimiters are never part of a string either). Stopping there keeps a run of unclosed calls linear, not quadratic.
 */
export function scanJsonValue(
  text: string,
  start: number,
  stops: readonly number[] = [],
  stopInStrings = false,
): JsonScan {
  const first = text[start];
  if (first !== "{" && first !== "[") return { status: "absent" };
  // The first stop after `start` (binary search: outputs can hold thousands of delimiters).
  let k = 0;
  for (let hi = stops.length; k < hi; ) {
    const mid = (k + hi) >>> 1;
    if ((stops[mid] as number) <= start) k = mid + 1;
    else hi = mid;
  }
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    if (i === stops[k]) {
      if (!inString || stopInStrings) return { status: "incomplete", end: i };
      k++;
    }
    const c = text[i];
    if (inString) {
      if (c === "\\") {
        // The escaped character is skipped; a delimiter starting there still counts as one.
        if (i + 1 === stops[k] && stopInStrings) return { status: "incomplete", end: i + 1 };
        if (i + 1 === stops[k]) k++;
        i++;
      } else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") {
      depth--;
      if (depth === 0) {
        const end = i + 1;
        try {
          return { status: "complete", end, value: JSON.parse(text.slice(start, end)) };
        } catch (err) {
          return { status: "malformed", end, message: (err as Error).message };
        }
      }
    }
  }
  return { status: "incomplete", end: text.length };
}

/** JSON.parse as data. */
export function parseJson(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (err) {
    return { ok: false, message: (err as Error).message };
  }
}
