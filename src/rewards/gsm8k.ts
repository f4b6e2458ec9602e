/**
 * verl's GSM8K rule scorer (verl/utils/reward_score/gsm8k.py), reimplemented from its documented behaviour,
 * quirks included, because trained policies are compared against verl runs and must be scored identically.
 */

/** verl only looks at the tail of the response: regexes on long strings are slow and the answer comes last. */
export const SOLUTION_CLIP_CHARS = 300;

export type ExtractMethod = "strict" | "flexible";

const STRICT_PATTERN = /#### (\-?[0-9\.\,]+)/g;
const FLEXIBLE_PATTERN = /(\-?[0-9\.\,]+)/g;
/** Flexible matches that do not count as a number. */
const FLEXIBLE_INVALID = new Set(["", "."]);

/** The last `n` characters counted in code points, as Python's `s[-n:]` does on a str. */
export function lastCodePoints(s: string, n: number): string {
  // A string of n UTF-16 units or fewer has at most n code points.
  if (s.length <= n) return s;
  // Counted back from the end: splitting the whole response into code points cost more than scoring it.
  let start = s.length;
  for (let count = 0; count < n && start > 0; count++) {
    start -= isSurrogatePairEnd(s, start) ? 2 : 1;
  }
  return s.slice(start);
}

/** True when the two UTF-16 units before `end` are a high and a low surrogate: one code point, as Python counts it. */
function isSurrogatePairEnd(s: string, end: number): boolean {
  if (end < 2) return false;
  const low = s.charCodeAt(end - 1);
  const high = s.charCodeAt(end - 2);
  return low >= 0xdc00 && low <= 0xdfff && high >= 0xd800 && high <= 0xdbff;
}

/**
 * Pulls the final answer out of a response.
 * - strict: the last `#### <number>` with `,` and `$` removed; null when there is none.
 * - flexible: the last number-like run that is not "" or "."; commas and trailing periods are kept
 *   (so "1,000" != "1000" and "18." != "18"). Quirk kept from verl: when every match is invalid,
 *   the result is the *first* match (the loop variable's last value when iterating in reverse).
 */
export function extractSolution(solution: string, method: ExtractMethod = "strict"): string | null {
  const tail = lastCodePoints(solution, SOLUTION_CLIP_CHARS);
  if (method === "strict") {
    const matches = [...tail.matchAll(STRICT_PATTERN)].map((m) => m[1] ?? "");
    const last = matches.at(-1);
    return last === undefined ? null : last.replaceAll(",", "").replaceAll("$", "");
  }
  const matches = [...tail.matchAll(FLEXIBLE_PATTERN)].map((m) => m[1] ?? "");
  if (matches.length === 0) return null;
  let finalAnswer = matches[0] as string;
  for (let i = matches.length - 1; i >= 0; i--) {
    finalAnswer = matches[i] as string;
    if (!FLEXIBLE_INVALID.has(finalAnswer)) break;
  }
  return finalAnswer;
}

/**
 * A score plus whether anything was extracted. verl returns the *int* 0 when nothing is extracted and the float
 * `score`/`format_score` otherwise; the distinction shows in texts such as `reward=0` versus `reward=0.0`.
 */
export interface Gsm8kScore {
  score: number;
  /** True when verl would return the int 0 (nothing extracted). */
  nothingExtracted: boolean;
  extracted: string | null;
}

export function scoreGsm8k(
  solution: string,
  groundTruth: string,
  method: ExtractMethod = "strict",
  formatScore = 0.0,
  score = 1.0,
): Gsm8kScore {
  const extracted = extractSolution(solution, method);
  if (extracted === null) return { score: 0, nothingExtracted: true, extracted };
  return { score: extracted === groundTruth ? score : formatScore, nothingExtracted: false, extracted };
}

/** verl's `gsm8k.compute_score`: 0 when nothing is extracted, `score` on an exact string match, else `formatScore`. */
export function computeScore(
  solution: string,
  groundTruth: string,
  method: ExtractMethod = "strict",
  formatScore = 0.0,
  score = 1.0,
): number {
  return scoreGsm8k(solution, groundTruth, method, formatScore, score).score;
}
