/**
 * `--group ID`: the n samples of one prompt side by side (one column each, as many as fit the width), with their
 * rewards, advantages and how each ended, so a group with no reward variance (zero advantage) or one odd sample
 * stands out.
 */
import type { Trajectory } from "../data/trajectory.js";
import { fitTable, fmt, type Look } from "./output.js";
import { stripTemplate } from "./show.js";
import { sampledTokens } from "./record.js";

export interface GroupSample {
  id: string;
  sample_index: number;
  reward: number;
  score: number;
  advantage: number | null;
  turns: number;
  tool_calls: number;
  tool_errors: number;
  parse_errors: number;
  finish: string;
  status: string;
  length: number;
  sampled: number;
  /** The last assistant turn's text: usually the answer. */
  final_text: string;
}

export interface GroupView {
  group: string;
  data_source: string | null;
  ground_truth: string | null;
  samples: GroupSample[];
  reward: { mean: number; std: number };
}

export function groupSample(t: Trajectory): GroupSample {
  const last = [...t.segments].reverse().find((s) => s.kind === "assistant");
  return {
    id: t.id,
    sample_index: t.sample_index,
    reward: t.reward,
    score: t.score,
    advantage: t.advantage ?? null,
    turns: t.assistant_turns,
    tool_calls: t.tool_calls,
    tool_errors: t.tool_errors,
    parse_errors: t.parse_errors,
    finish: t.finish_reason,
    status: t.status,
    length: t.response_ids.length,
    sampled: sampledTokens(t),
    final_text: last ? stripTemplate(last.text) : "",
  };
}

export function buildGroupView(group: string, members: Trajectory[]): GroupView {
  const samples = members.map(groupSample).sort((a, b) => a.sample_index - b.sample_index);
  const n = samples.length;
  const mean = n ? samples.reduce((a, s) => a + s.reward, 0) / n : 0;
  const std = n > 1 ? Math.sqrt(samples.reduce((a, s) => a + (s.reward - mean) ** 2, 0) / (n - 1)) : 0;
  return {
    group,
    data_source: members[0]?.data_source ?? null,
    ground_truth: members[0]?.ground_truth ?? null,
    samples,
    reward: { mean, std },
  };
}

export function renderGroup(view: GroupView, look: Look, maxChars: number): string {
  const out = [
    `group ${view.group} · ${view.samples.length} samples · ${view.data_source ?? "?"} · ground truth ${view.ground_truth ?? "–"} · ` +
      `reward mean ${fmt(view.reward.mean)} ± ${fmt(view.reward.std)}` +
      (view.samples.length > 1 && view.reward.std === 0 ? " (no variance: zero advantage for every sample)" : ""),
  ];
  // Columns of about 24 characters each; more samples than fit go to further tables.
  const perTable = Math.max(1, Math.floor((look.width - 14) / 24));
  for (let start = 0; start < view.samples.length; start += perTable) {
    const chunk = view.samples.slice(start, start + perTable);
    const rows: Array<[string, (s: GroupSample) => string]> = [
      ["id", (s) => s.id],
      ["reward", (s) => fmt(s.reward)],
      ["score", (s) => fmt(s.score)],
      ["advantage", (s) => fmt(s.advantage)],
      ["turns", (s) => String(s.turns)],
      ["tool calls", (s) => `${s.tool_calls} (${s.tool_errors} err, ${s.parse_errors} parse)`],
      ["finish", (s) => s.finish],
      ["tokens", (s) => `${s.length} (${s.sampled} sampled)`],
      ["answer", (s) => (s.final_text.length > maxChars ? `…${s.final_text.slice(-maxChars)}` : s.final_text)],
    ];
    out.push(
      fitTable(
        look,
        ["", ...chunk.map((s) => `sample ${s.sample_index}`)],
        rows.map(([label, get]) => [label, ...chunk.map(get)]),
      ),
    );
  }
  return out.join("\n");
}
