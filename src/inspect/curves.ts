/**
 * Run-folder curves and alerts from metrics.jsonl. A curve is any metric per step, drawn in the terminal as a
 * sparkline (overview) or a small block chart (--metric). Alerts are plain rules over the series, documented in
 * docs/inspect.md:
 * - tool-use collapse: tool calls per trajectory (mean of the last 3 steps) fell to ≤ 25% of its best 3-step mean,
 *   which was at least 0.2;
 * - spikes: a value above `ratio` × the median of the previous (up to 10) steps and above it by at least `floor`
 *   (clip fraction: 3×, +0.05, or above 0.3 at any step; KL: 5×, +0.01; grad norm: 5×, +0.5). A policy collapse shows
 *   as KL and grad-norm spikes before the reward falls; the grad-norm floor keeps steps whose gradient is near 0
 *   (a batch of equal-reward groups has no advantage) from making every ordinary step after them a "spike".
 */
import type { MetricsRow } from "./source.js";
import { fmt, painter, type Look } from "./output.js";

/** Names people type → the metrics.jsonl keys tried in order (docs/run-folder.md). */
export const METRIC_ALIASES: Record<string, string[]> = {
  reward: ["critic/rewards/mean", "critic/score/mean"],
  score: ["critic/score/mean"],
  accuracy: ["acc/mean"],
  kl: ["actor/kl_loss", "actor/ppo_kl", "rollout/mismatch_kl"],
  ppo_kl: ["actor/ppo_kl"],
  entropy: ["actor/entropy"],
  response_length: ["response_length/mean"],
  tool_calls: ["tool/calls_per_traj"],
  tool_errors: ["tool/error_rate"],
  clip_fraction: ["actor/pg_clipfrac"],
  grad_norm: ["actor/grad_norm"],
  turns: ["num_turns/mean"],
  staleness: ["async/staleness_mean"],
  token_staleness: ["async/token_staleness_mean"],
  dropped_stale: ["async/dropped_stale"],
  partial_rollouts: ["async/partial_rollout_frac"],
};

/**
 * Names resolved by pattern, for keys that carry a data source: val_accuracy is the greedy validation accuracy
 * (verl's val-core/<data source>/acc/mean@1), the curve a run is judged by; the first data source in key order wins.
 */
const METRIC_PATTERNS: Record<string, RegExp> = {
  val_accuracy: /^val-core\/.+\/acc\/mean@1$/,
};

export const DEFAULT_CURVES = ["reward", "accuracy", "val_accuracy", "kl", "grad_norm", "entropy", "response_length", "tool_calls", "clip_fraction"];

/** Shown too when generation ran ahead of the trainer (async_training.mode): how stale each step's samples were. */
const ASYNC_CURVES = ["staleness", "token_staleness", "dropped_stale", "partial_rollouts"];
const ASYNC_SIGNS = ["async/staleness_max", "async/token_staleness_max", "async/dropped_stale"];

/** The curves an overview draws: the defaults, and the staleness ones for a run whose samples were ever stale. */
export function defaultCurves(rows: readonly MetricsRow[]): string[] {
  const ranAhead = rows.some((r) => ASYNC_SIGNS.some((key) => (r.values[key] ?? 0) > 0));
  return ranAhead ? [...DEFAULT_CURVES, ...ASYNC_CURVES] : DEFAULT_CURVES;
}

export interface Curve {
  name: string;
  key: string;
  points: Array<[number, number]>;
}

export function resolveMetricKey(name: string, rows: readonly MetricsRow[]): string | null {
  const pattern = METRIC_PATTERNS[name];
  if (pattern) return metricKeys(rows).find((key) => pattern.test(key)) ?? null;
  const candidates = METRIC_ALIASES[name] ?? [name];
  for (const key of candidates) if (rows.some((r) => key in r.values)) return key;
  return null;
}

export function curveOf(name: string, rows: readonly MetricsRow[]): Curve | null {
  const key = resolveMetricKey(name, rows);
  if (!key) return null;
  return { name, key, points: rows.filter((r) => key in r.values).map((r) => [r.step, r.values[key]!]) };
}

/** Every numeric key present in metrics.jsonl, for "unknown metric" hints. */
export function metricKeys(rows: readonly MetricsRow[]): string[] {
  const keys = new Set<string>();
  for (const r of rows) for (const k of Object.keys(r.values)) keys.add(k);
  return [...keys].sort();
}

const BLOCKS = "▁▂▃▄▅▆▇█";

/** Resamples values to at most `width` points (mean of each bucket). */
function resample(values: number[], width: number): number[] {
  if (values.length <= width) return values;
  const out: number[] = [];
  for (let i = 0; i < width; i++) {
    const from = Math.floor((i * values.length) / width);
    const to = Math.max(from + 1, Math.floor(((i + 1) * values.length) / width));
    const slice = values.slice(from, to);
    out.push(slice.reduce((a, b) => a + b, 0) / slice.length);
  }
  return out;
}

export function sparkline(values: number[], width: number): string {
  const v = resample(values, width);
  if (v.length === 0) return "";
  const min = Math.min(...v);
  const max = Math.max(...v);
  return v.map((x) => BLOCKS[max === min ? 3 : Math.round(((x - min) / (max - min)) * 7)]).join("");
}

/** A block chart `height` rows tall: one column per (resampled) step, y labels on the left. */
export function chart(curve: Curve, width: number, height = 8): string {
  const labelWidth = 10;
  const values = resample(curve.points.map((p) => p[1]), Math.max(8, width - labelWidth - 2));
  if (values.length === 0) return `${curve.name}: no values`;
  const min = Math.min(...values);
  const max = Math.max(...values);
  const span = max - min || 1;
  const levels = values.map((x) => Math.round(((x - min) / span) * (height * 8 - 1)));
  const lines: string[] = [];
  for (let row = height - 1; row >= 0; row--) {
    const label = row === height - 1 ? fmt(max, 4) : row === 0 ? fmt(min, 4) : "";
    const cells = levels.map((level) => {
      const within = level - row * 8;
      if (within >= 8) return "█";
      if (within < 0) return " ";
      return BLOCKS[within]!;
    });
    lines.push(`${label.padStart(labelWidth)} │${cells.join("")}`);
  }
  const first = curve.points[0]![0];
  const last = curve.points[curve.points.length - 1]![0];
  lines.push(`${"".padStart(labelWidth)} └${"─".repeat(values.length)}`);
  lines.push(`${"".padStart(labelWidth)}  step ${first}${" ".repeat(Math.max(1, values.length - String(first).length - String(last).length - 5))}${last}`);
  return lines.join("\n");
}

export interface Alert {
  kind: "tool_use_collapse" | "clip_fraction_spike" | "kl_spike" | "grad_norm_spike";
  step: number;
  metric: string;
  value: number;
  /** What it was compared against (peak or median). */
  baseline: number;
  message: string;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function toolCollapseAlert(curve: Curve | null): Alert | null {
  if (!curve || curve.points.length < 4) return null;
  const values = curve.points.map((p) => p[1]);
  let peak = -Infinity;
  let peakStep = curve.points[0]![0];
  for (let i = 0; i + 3 <= values.length; i++) {
    const m = mean(values.slice(i, i + 3));
    if (m > peak) {
      peak = m;
      peakStep = curve.points[i]![0];
    }
  }
  const recent = mean(values.slice(-3));
  if (peak < 0.2 || recent > 0.25 * peak) return null;
  const step = curve.points[curve.points.length - 1]![0];
  return {
    kind: "tool_use_collapse",
    step,
    metric: curve.key,
    value: recent,
    baseline: peak,
    message: `tool use is collapsing: ${fmt(recent, 2)} calls per trajectory over the last 3 steps (to step ${step}), down from ${fmt(peak, 2)} around step ${peakStep}`,
  };
}

export function spikeAlerts(
  curve: Curve | null,
  kind: "clip_fraction_spike" | "kl_spike" | "grad_norm_spike",
  rule: { ratio: number; floor: number; absolute?: number },
): Alert[] {
  if (!curve) return [];
  const alerts: Alert[] = [];
  curve.points.forEach(([step, value], i) => {
    const previous = curve.points.slice(Math.max(0, i - 10), i).map((p) => p[1]);
    const baseline = previous.length >= 3 ? median(previous) : null;
    const relative = baseline !== null && value > rule.ratio * baseline && value - baseline >= rule.floor;
    const absolute = rule.absolute !== undefined && value > rule.absolute;
    if (!relative && !absolute) return;
    const what = { kl_spike: "KL", clip_fraction_spike: "clip fraction", grad_norm_spike: "grad norm" }[kind];
    alerts.push({
      kind,
      step,
      metric: curve.key,
      value,
      baseline: baseline ?? 0,
      message:
        `${what} spike at step ${step}: ${curve.key} = ${fmt(value, 4)}` +
        (baseline !== null ? ` vs median ${fmt(baseline, 4)} of the steps before` : ` (above ${rule.absolute})`),
    });
  });
  return alerts;
}

export function runAlerts(rows: readonly MetricsRow[]): Alert[] {
  const alerts: Alert[] = [];
  const collapse = toolCollapseAlert(curveOf("tool_calls", rows));
  if (collapse) alerts.push(collapse);
  alerts.push(...spikeAlerts(curveOf("clip_fraction", rows), "clip_fraction_spike", { ratio: 3, floor: 0.05, absolute: 0.3 }));
  for (const key of ["actor/ppo_kl", "actor/kl_loss"]) {
    alerts.push(...spikeAlerts(curveOf(key, rows), "kl_spike", { ratio: 5, floor: 0.01 }));
  }
  alerts.push(...spikeAlerts(curveOf("grad_norm", rows), "grad_norm_spike", { ratio: 5, floor: 0.5 }));
  return alerts.sort((a, b) => a.step - b.step);
}

export function renderCurves(curves: Curve[], alerts: Alert[], look: Look, options: { charts: boolean }): string {
  const p = painter(look);
  const out: string[] = [];
  if (curves.length === 0) out.push("no metrics yet (metrics.jsonl is empty or missing)");
  const nameWidth = Math.max(6, ...curves.map((c) => c.name.length));
  const sparkWidth = Math.max(10, look.width - nameWidth - 48);
  for (const c of curves) {
    const values = c.points.map((x) => x[1]);
    if (options.charts) {
      out.push(p.bold(`${c.name} (${c.key}), ${c.points.length} steps`));
      out.push(chart(c, look.width));
      continue;
    }
    out.push(
      `${c.name.padEnd(nameWidth)} ${p.cyan(sparkline(values, sparkWidth))}  first ${fmt(values[0], 4)} · last ${fmt(values.at(-1), 4)} · ` +
        `min ${fmt(Math.min(...values), 4)} · max ${fmt(Math.max(...values), 4)}`,
    );
  }
  if (alerts.length) {
    out.push(p.bold(p.red(`${alerts.length} alert${alerts.length === 1 ? "" : "s"}:`)));
    for (const a of alerts) out.push(p.red(`  ! ${a.message}`));
  } else if (curves.length) {
    out.push(p.green("no alerts (tool use steady, no clip-fraction, KL or grad-norm spikes)"));
  }
  return out.join("\n");
}
