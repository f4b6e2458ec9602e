/** The summary as text: the tables of issue 8 (per data source, finish reasons, turns, tools, lengths, drift, masks). */
import type { InspectSummary } from "./summary.js";
import { fitTable, fmt, painter, pct, wrapText, type Look, type Painter } from "./output.js";

const byCount = (counts: Record<string, number>) => Object.entries(counts).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
const byNumericKey = (counts: Record<string, number>) => Object.entries(counts).sort((a, b) => Number(a[0]) - Number(b[0]));

/** A bar of `count/total` in at most `width` cells. */
export function bar(count: number, total: number, width: number): string {
  if (total <= 0 || width <= 0) return "";
  const cells = Math.round((count / total) * width);
  return "█".repeat(cells || (count > 0 ? 1 : 0));
}

export function renderSummary(s: InspectSummary, look: Look, title: string): string {
  const p = painter(look);
  const head = p.bold(wrapText(title, look.width));
  if (s.overall.count === 0) return [head, "no trajectories"].join("\n");
  const barWidth = Math.max(5, Math.min(30, look.width - 40));
  // Tables are laid out to the width by fitTable; the title (a file path can be long) and the sentences wrap.
  return [
    head,
    rewardTable(s, look),
    ...outcomeTables(s, look, barWidth),
    ...toolSection(s, look),
    ...lengthSection(s, look, barWidth),
    ...healthLines(s, look, p),
  ].join("\n");
}

/** Reward per data source, with an "all" row when there are several. */
function rewardTable(s: InspectSummary, look: Look): string {
  const o = s.overall;
  return fitTable(
    look,
    ["data source", "trajectories", "reward mean", "std", "min", "max", "accuracy"],
    [
      ...s.byDataSource.map((d) => [d.dataSource, d.count, fmt(d.reward.mean), fmt(d.reward.std), fmt(d.reward.min), fmt(d.reward.max), pct(d.accuracy)]),
      ...(s.byDataSource.length > 1
        ? [["all", o.count, fmt(o.reward.mean), fmt(o.reward.std), fmt(o.reward.min), fmt(o.reward.max), pct(o.accuracy)]]
        : []),
    ],
  );
}

/** How trajectories ended and how long they ran: status, finish reason, turns, tool calls. */
function outcomeTables(s: InspectSummary, look: Look, barWidth: number): string[] {
  const o = s.overall;
  const histogram = (counts: Record<string, number>) => byNumericKey(counts).map(([k, c]) => [k, c, bar(c, o.count, barWidth)]);
  return [
    fitTable(look, ["status", "count"], byCount(o.byStatus)),
    fitTable(look, ["finish reason", "count", "share"], byCount(o.finishReasons).map(([k, c]) => [k, c, pct(c / o.count)])),
    fitTable(look, ["assistant turns", "trajectories", ""], histogram(o.turnsHistogram)),
    fitTable(look, ["tool calls / traj", "trajectories", ""], histogram(s.toolCallsHistogram)),
  ];
}

/** Tool-call rates, then one row per tool. */
function toolSection(s: InspectSummary, look: Look): string[] {
  const o = s.overall;
  const rates = wrapText(
    `tool calls per trajectory ${fmt(o.toolCallsPerTrajectory, 2)} · trajectories with a call ${pct(o.toolCallRate)} · ` +
      `parse errors ${pct(o.parseErrorRate)} of attempted calls · tool errors ${pct(o.toolErrorRate)} of executed calls`,
    look.width,
  );
  if (!s.tools.length) return [rates];
  const table = fitTable(
    look,
    ["tool", "calls", "ran", "tool errors", "parse errors", "p50 ms", "p95 ms", "error kinds"],
    s.tools.map((t) => [
      t.name,
      t.attempts,
      t.executed,
      `${t.errors} (${pct(t.errorRate)})`,
      `${t.parseErrors} (${pct(t.parseErrorRate)})`,
      fmt(t.latencyMs.p50, 1),
      fmt(t.latencyMs.p95, 1),
      Object.entries(t.errorKinds).map(([k, c]) => `${k}×${c}`).join("\n") || "–",
    ]),
  );
  return [rates, table];
}

/** The response-length histogram and its statistics. */
function lengthSection(s: InspectSummary, look: Look, barWidth: number): string[] {
  const r = s.responseLength;
  const o = s.overall;
  return [
    fitTable(look, ["response tokens", "trajectories", ""], r.histogram.map((b) => [`${b.from}–${b.to - 1}`, b.count, bar(b.count, o.count, barWidth)])),
    wrapText(
      `response tokens: mean ${fmt(r.mean, 1)} · min ${r.min} · p50 ${r.p50} · p95 ${r.p95} · max ${r.max} · ` +
        `sampled (mask 1) ${o.sampledTokens}`,
      look.width,
    ),
  ];
}

/** What needs a look: drift, empty masks, advantages, the log-prob gap, retries. */
function healthLines(s: InspectSummary, look: Look, p: Painter): string[] {
  const lines: string[] = [];
  const say = (line: string) => lines.push(wrapText(line, look.width));
  const driftLine = `drift: ${s.drift.count} trajector${s.drift.count === 1 ? "y" : "ies"}` + idList(s.drift.ids, s.drift.count);
  say(s.drift.count ? p.yellow(driftLine) : driftLine);
  const emptyLine =
    `mask covers no token: ${s.emptyMask.count} trajector${s.emptyMask.count === 1 ? "y" : "ies"}` + idList(s.emptyMask.ids, s.emptyMask.count);
  say(s.emptyMask.count ? p.red(emptyLine) : emptyLine);
  if (s.advantage) {
    say(`advantage: mean ${fmt(s.advantage.mean)} · min ${fmt(s.advantage.min)} · max ${fmt(s.advantage.max)} (${s.advantage.count} trajectories)`);
  }
  if (s.logprobGap) {
    say(
      `trainer vs behaviour log-prob gap: mean |Δ| ${s.logprobGap.meanAbs.toExponential(2)} · max |Δ| ${fmt(s.logprobGap.maxAbs, 4)} ` +
        `(in ${s.logprobGap.maxId}) over ${s.logprobGap.tokens} sampled tokens`,
    );
  }
  if (s.overall.retries) say(`request retries: ${s.overall.retries}`);
  const versions = versionsLine(s);
  if (versions) say(versions);
  return lines;
}

function idList(ids: string[], count: number): string {
  if (ids.length === 0) return "";
  return `: ${ids.join(", ")}${count > ids.length ? `, ... (${count - ids.length} more; --where to list them)` : ""}`;
}

/**
 * Which weight versions sampled the tokens, when more than one did or the samples were stale: what an async run's
 * step looked like (`weight versions: 3 70% · 4 30% · 12 trajectories continued across a weight update · token
 * staleness mean 0.30, max 1`).
 */
function versionsLine(s: InspectSummary): string | null {
  const v = s.weightVersions;
  if (!v) return null;
  const stale = v.staleness && v.staleness.max > 0;
  if (v.tokens.length < 2 && !stale) return null;
  const total = v.tokens.reduce((a, e) => a + e.tokens, 0) || 1;
  const parts = [`weight versions: ${v.tokens.map((e) => `${e.version} ${Math.round((100 * e.tokens) / total)}%`).join(" · ")}`];
  if (v.continued) parts.push(`${v.continued} trajector${v.continued === 1 ? "y" : "ies"} continued across a weight update`);
  if (v.staleness) parts.push(`token staleness mean ${fmt(v.staleness.mean, 2)}, max ${v.staleness.max}`);
  return parts.join(" · ");
}
