/** `--diff K1 K2`: two steps' rollout summaries and metrics side by side, with the change. */
import type { InspectSummary } from "./summary.js";
import { defaultCurves, resolveMetricKey } from "./curves.js";
import type { MetricsRow } from "./source.js";
import { fitTable, fmt, pct, type Look } from "./output.js";

export interface DiffRow {
  quantity: string;
  a: number | null;
  b: number | null;
  delta: number | null;
  /** How to print values: a share as a percentage, else a number. */
  unit: "share" | "number";
}

export interface DiffView {
  steps: [number, number];
  rows: DiffRow[];
  summaries: [InspectSummary | null, InspectSummary | null];
}

function row(quantity: string, a: number | null, b: number | null, unit: DiffRow["unit"] = "number"): DiffRow {
  return { quantity, a, b, delta: a !== null && b !== null ? b - a : null, unit };
}

export function buildDiff(
  steps: [number, number],
  summaries: [InspectSummary | null, InspectSummary | null],
  metrics: readonly MetricsRow[],
): DiffView {
  const [sa, sb] = summaries;
  const both = <T>(get: (s: InspectSummary) => T): [T | null, T | null] => [sa ? get(sa) : null, sb ? get(sb) : null];
  const rows: DiffRow[] = [];
  if (sa || sb) {
    rows.push(row("trajectories", ...both((s) => s.overall.count)));
    rows.push(row("reward mean", ...both((s) => s.overall.reward.mean)));
    rows.push(row("reward std", ...both((s) => s.overall.reward.std)));
    rows.push(row("accuracy", ...both((s) => s.overall.accuracy), "share"));
    rows.push(row("tool calls / traj", ...both((s) => s.overall.toolCallsPerTrajectory)));
    rows.push(row("trajectories with a call", ...both((s) => s.overall.toolCallRate), "share"));
    rows.push(row("parse error rate", ...both((s) => s.overall.parseErrorRate), "share"));
    rows.push(row("tool error rate", ...both((s) => s.overall.toolErrorRate), "share"));
    rows.push(row("response tokens mean", ...both((s) => s.responseLength.mean)));
    rows.push(row("response tokens p95", ...both((s) => s.responseLength.p95)));
    rows.push(row("drift", ...both((s) => s.drift.count)));
    rows.push(row("mask covers no token", ...both((s) => s.emptyMask.count)));
    const reasons = new Set([...Object.keys(sa?.overall.finishReasons ?? {}), ...Object.keys(sb?.overall.finishReasons ?? {})]);
    for (const reason of [...reasons].sort()) {
      const share = (s: InspectSummary) => (s.overall.count ? (s.overall.finishReasons[reason] ?? 0) / s.overall.count : 0);
      rows.push(row(`finish ${reason}`, ...both(share), "share"));
    }
  }
  const at = (step: number) => metrics.find((m) => m.step === step)?.values ?? null;
  const [ma, mb] = [at(steps[0]), at(steps[1])];
  for (const name of defaultCurves(metrics)) {
    const key = resolveMetricKey(name, metrics);
    if (!key) continue;
    const a = ma?.[key] ?? null;
    const b = mb?.[key] ?? null;
    if (a !== null || b !== null) rows.push(row(`metric ${key}`, a, b));
  }
  return { steps, rows, summaries };
}

export function renderDiff(view: DiffView, look: Look): string {
  const show = (value: number | null, unit: DiffRow["unit"]) => (value === null ? "–" : unit === "share" ? pct(value) : fmt(value));
  const delta = (r: DiffRow) => {
    if (r.delta === null) return "–";
    const text = r.unit === "share" ? `${(100 * r.delta).toFixed(1)} pts` : fmt(r.delta);
    return r.delta > 0 ? `+${text}` : text;
  };
  const missing = view.steps.filter((_, i) => view.summaries[i] === null);
  const note = missing.length ? `\nno rollouts for step ${missing.join(", ")}: only metrics compared` : "";
  return (
    fitTable(
      look,
      ["", `step ${view.steps[0]}`, `step ${view.steps[1]}`, "change"],
      view.rows.map((r) => [r.quantity, show(r.a, r.unit), show(r.b, r.unit), delta(r)]),
    ) + note
  );
}
