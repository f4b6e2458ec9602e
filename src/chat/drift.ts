/**
 * The drift check: compares the tokens a conversation accumulated (what the engine saw) with a fresh render of its
 * message list. A difference is reported, never repaired: the accumulated tokens are the training record.
 *
 * Modes, named as verl names them:
 * - `strict`: any difference in token ids is drift;
 * - `ignore_strippable`: differences made only of whitespace are tolerated (reported as `whitespace_only`);
 * - `off`: no check.
 */
import type { ChatModel } from "./model.js";

export type DriftMode = "strict" | "ignore_strippable" | "off";
export const DRIFT_MODES: readonly DriftMode[] = ["strict", "ignore_strippable", "off"];

export type DriftStatus = "match" | "drift" | "whitespace_only" | "skipped";

export interface DriftReport {
  status: DriftStatus;
  mode: DriftMode;
  /** First token index (into the whole sequence, prompt included) where the two differ; -1 when they match. */
  firstDifference: number;
  accumulatedLength: number;
  renderedLength: number;
  /** Text around the first difference, a few tokens either side, as accumulated and as rendered. */
  accumulatedExcerpt: string;
  renderedExcerpt: string;
}

const EXCERPT_TOKENS = 8;

export function compareTokens(
  model: ChatModel,
  accumulated: readonly number[],
  rendered: readonly number[],
  mode: DriftMode,
): DriftReport {
  const base = {
    mode,
    accumulatedLength: accumulated.length,
    renderedLength: rendered.length,
  };
  if (mode === "off") {
    return { ...base, status: "skipped", firstDifference: -1, accumulatedExcerpt: "", renderedExcerpt: "" };
  }
  const first = firstDifference(accumulated, rendered);
  if (first < 0) return { ...base, status: "match", firstDifference: -1, accumulatedExcerpt: "", renderedExcerpt: "" };

  const excerpt = (ids: readonly number[]) =>
    model.decode(ids.slice(Math.max(0, first - EXCERPT_TOKENS), first + EXCERPT_TOKENS));
  const report = {
    ...base,
    firstDifference: first,
    accumulatedExcerpt: excerpt(accumulated),
    renderedExcerpt: excerpt(rendered),
  };
  // Removing every whitespace character equates two texts exactly when all their differing pieces are whitespace.
  const squeeze = (ids: readonly number[]) => model.decode(ids).replace(/\s+/gu, "");
  const whitespaceOnly = mode === "ignore_strippable" && squeeze(accumulated) === squeeze(rendered);
  return { ...report, status: whitespaceOnly ? "whitespace_only" : "drift" };
}

function firstDifference(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}
