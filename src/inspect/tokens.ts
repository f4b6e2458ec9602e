/**
 * The token-level view of one trajectory: every response token with its loss mask, the behaviour (engine)
 * log-prob, and, where the trainer's log-probs are in the file, the gap trainer − behaviour with the largest gaps
 * flagged. Mask-1 tokens are shaded green, mask-0 tokens grey; without colour the mask column carries the same
 * information. Token text needs the tokenizer (--model, or the run's config); without it tokens show as ids.
 */
import type { Trajectory } from "../data/trajectory.js";
import { painter, visibleLength, type Look } from "./output.js";

/** How many of the largest gaps are flagged. */
export const FLAGGED_GAPS = 5;

export interface TokenRow {
  pos: number;
  id: number;
  text: string | null;
  mask: number;
  logprob: number;
  trainer_logprob: number | null;
  /** trainer − behaviour, on mask-1 tokens only. */
  gap: number | null;
  /** 1 for the largest |gap|, 2 for the next...; null when not among the FLAGGED_GAPS largest. */
  gap_rank: number | null;
  segment: string;
}

export interface TokenView {
  id: string;
  tokens: TokenRow[];
  sampled: number;
  has_trainer_logprobs: boolean;
  gap: { mean_abs: number; max_abs: number; max_pos: number } | null;
}

export type DecodeToken = (id: number) => string;

export function buildTokenView(t: Trajectory, decode: DecodeToken | null): TokenView {
  const segmentAt: string[] = new Array(t.response_ids.length).fill("");
  let assistant = -1;
  for (const s of t.segments) {
    if (s.kind === "prompt") continue;
    if (s.kind === "assistant") assistant += 1;
    const label = s.kind === "assistant" ? `assistant turn ${assistant}` : s.kind === "user" ? "user (interaction)" : s.kind;
    for (let i = Math.max(0, s.start); i < Math.min(s.end, segmentAt.length); i++) segmentAt[i] = label;
  }
  const trainer = t.trainer_logprobs ?? null;
  const tokens: TokenRow[] = t.response_ids.map((id, pos) => {
    const mask = t.response_mask[pos] ?? 0;
    const logprob = t.response_logprobs[pos] ?? 0;
    const trainerLogprob = trainer ? (trainer[pos] ?? null) : null;
    return {
      pos,
      id,
      text: decode ? decode(id) : null,
      mask,
      logprob,
      trainer_logprob: trainerLogprob,
      gap: mask === 1 && trainerLogprob !== null ? trainerLogprob - logprob : null,
      gap_rank: null,
      segment: segmentAt[pos] ?? "",
    };
  });
  const withGap = tokens.filter((r) => r.gap !== null && r.gap !== 0);
  withGap
    .sort((a, b) => Math.abs(b.gap!) - Math.abs(a.gap!) || a.pos - b.pos)
    .slice(0, FLAGGED_GAPS)
    .forEach((row, rank) => {
      row.gap_rank = rank + 1;
    });
  const gaps = tokens.filter((r) => r.gap !== null);
  let gap: TokenView["gap"] = null;
  if (gaps.length) {
    const top = gaps.reduce((best, r) => (Math.abs(r.gap!) > Math.abs(best.gap!) ? r : best));
    gap = {
      mean_abs: gaps.reduce((a, r) => a + Math.abs(r.gap!), 0) / gaps.length,
      max_abs: Math.abs(top.gap!),
      max_pos: top.pos,
    };
  }
  return {
    id: t.id,
    tokens,
    sampled: tokens.reduce((a, r) => a + r.mask, 0),
    has_trainer_logprobs: trainer !== null,
    gap,
  };
}

/** Makes whitespace and control characters visible (␣ for a space, \n for a newline), so a token's exact text can be read. */
export function visibleToken(text: string): string {
  return text
    .replace(/\\/g, "\\\\")
    .replace(/ /g, "␣")
    .replace(/\n/g, "\\n")
    .replace(/\t/g, "\\t")
    .replace(/\r/g, "\\r")
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u001f\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

export function renderTokens(view: TokenView, look: Look, options: { decoded: boolean }): string {
  const p = painter(look);
  const out: string[] = [];
  out.push(
    `${p.bold(`trajectory ${view.id}`)} · ${view.tokens.length} response tokens, ${view.sampled} with loss mask 1 ` +
      (look.color ? `(${p.bgGreen(" trained ")} ${p.bgGray(" not trained ")})` : "(■ 1 trained, · 0 not trained)"),
  );
  if (!options.decoded) out.push(p.dim("token text needs the tokenizer: pass --model DIR (ids shown instead)"));
  if (view.has_trainer_logprobs && view.gap) {
    out.push(`trainer − behaviour log-prob: mean |Δ| ${view.gap.mean_abs.toExponential(2)}, max |Δ| ${view.gap.max_abs.toFixed(4)} at token ${view.gap.max_pos}; the ${FLAGGED_GAPS} largest are flagged ◀`);
  } else if (!view.has_trainer_logprobs) {
    out.push(p.dim("no trainer log-probs in this file (a training step fills them in): no gap column"));
  }
  const textWidth = Math.min(32, Math.max(12, look.width - (view.has_trainer_logprobs ? 58 : 36)));
  const header = ["   pos", "mask", "     id", "token".padEnd(textWidth), "  logprob", ...(view.has_trainer_logprobs ? ["  trainer", "      gap"] : [])];
  out.push(p.dim(header.join(" ")));
  let segment = "";
  for (const r of view.tokens) {
    if (r.segment !== segment) {
      segment = r.segment;
      out.push(p.bold(`── ${segment || "(no segment)"} ──`));
    }
    let text = r.text === null ? `<${r.id}>` : visibleToken(r.text);
    if (visibleLength(text) > textWidth) text = `${[...text].slice(0, textWidth - 1).join("")}…`;
    const padded = text + " ".repeat(Math.max(0, textWidth - visibleLength(text)));
    const shaded = r.mask === 1 ? p.bgGreen(padded) : p.bgGray(p.dim(padded));
    const cols = [
      String(r.pos).padStart(6),
      (r.mask === 1 ? "■ 1" : "· 0").padStart(4),
      String(r.id).padStart(7),
      shaded,
      (r.mask === 1 ? r.logprob.toFixed(4) : "–").padStart(9),
    ];
    if (view.has_trainer_logprobs) {
      cols.push((r.mask === 1 && r.trainer_logprob !== null ? r.trainer_logprob.toFixed(4) : "–").padStart(9));
      const gapText = (r.gap === null ? "–" : (r.gap >= 0 ? "+" : "") + r.gap.toFixed(4)).padStart(9);
      cols.push(r.gap_rank !== null ? p.red(`${gapText} ◀ #${r.gap_rank}`) : gapText);
    }
    out.push(cols.join(" "));
  }
  return out.join("\n");
}
