/**
 * The drift check: compares the tokens a conversation accumulated (what the engine saw) with a fresh render of its
 * message list. A difference is reported, never repaired: the accumulated tokens are the training record.
 *
 * Modes, named as verl names them:
 * - `strict`: any difference in token ids is drift;
 * - `ignore_strippable`: differences made only of whitespace are tolerated (reported as `whitespace_only`);
 * - `off`: no check.
 *
 * In every mode, a difference made only of reasoning blocks (`<think>…</think>`) is reported as `reasoning_only`,
 * not as drift: templates such as Qwen3's drop the reasoning of earlier turns on re-render, while the engine saw it.
 * The record is still what the engine saw; calling it drift would bury real drift under every multi-turn trajectory.
 */
import type { ChatModel } from "./model.js";

export type DriftMode = "strict" | "ignore_strippable" | "off";
export const DRIFT_MODES: readonly DriftMode[] = ["strict", "ignore_strippable", "off"];

export type DriftStatus = "match" | "drift" | "whitespace_only" | "reasoning_only" | "skipped";

/** A reasoning block and the whitespace the template writes after it. */
const REASONING_BLOCK = /<think>[\s\S]*?<\/think>\s*/gu;

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
  accumulatedIds: ArrayLike<number>,
  renderedIds: ArrayLike<number>,
  mode: DriftMode,
): DriftReport {
  const base = {
    mode,
    accumulatedLength: accumulatedIds.length,
    renderedLength: renderedIds.length,
  };
  if (mode === "off") {
    return { ...base, status: "skipped", firstDifference: -1, accumulatedExcerpt: "", renderedExcerpt: "" };
  }
  const first = firstDifference(accumulatedIds, renderedIds);
  if (first < 0) return matchReport(mode, accumulatedIds.length);
  // A difference is rare: only then are the ids copied into plain arrays to decode.
  const accumulated = Array.from(accumulatedIds);
  const rendered = Array.from(renderedIds);

  const excerpt = (ids: readonly number[]) =>
    model.decode(ids.slice(Math.max(0, first - EXCERPT_TOKENS), first + EXCERPT_TOKENS));
  const report = {
    ...base,
    firstDifference: first,
    accumulatedExcerpt: excerpt(accumulated),
    renderedExcerpt: excerpt(rendered),
  };
  // Removing every whitespace character equates two texts exactly when all their differing pieces are whitespace;
  // removing every reasoning block, when all of them are reasoning blocks.
  const accumulatedText = model.decode(accumulated);
  const renderedText = model.decode(rendered);
  const squeeze = (text: string) => text.replace(/\s+/gu, "");
  const tolerated = (text: string) => (mode === "ignore_strippable" ? squeeze(text) : text);
  const withoutReasoning = (text: string) => tolerated(text.replace(REASONING_BLOCK, ""));
  if (mode === "ignore_strippable" && squeeze(accumulatedText) === squeeze(renderedText)) {
    return { ...report, status: "whitespace_only" };
  }
  if (withoutReasoning(accumulatedText) === withoutReasoning(renderedText)) return { ...report, status: "reasoning_only" };
  return { ...report, status: "drift" };
}

/** The report of two equal token sequences of `length` tokens. */
export function matchReport(mode: DriftMode, length: number): DriftReport {
  return { status: "match", mode, firstDifference: -1, accumulatedLength: length, renderedLength: length, accumulatedExcerpt: "", renderedExcerpt: "" };
}

/** True when `a` from index `from` on equals `b`, element for element and in length. */
export function equalFrom(a: ArrayLike<number>, from: number, b: ArrayLike<number>): boolean {
  if (a.length - from !== b.length) return false;
  for (let i = 0; i < b.length; i++) if (a[from + i] !== b[i]) return false;
  return true;
}

function firstDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}
