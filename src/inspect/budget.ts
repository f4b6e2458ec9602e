/**
 * The step budget of a run folder: where a training step's wall time went, from the timing_s/* metrics of
 * metrics.jsonl (docs/run-folder.md). One row per component with its median and mean seconds over the steps, and its
 * share of the step (mean over mean, so the shares add up); "other" is what no component measured (the worker's
 * messages, advantages, the trainer log-probs copied into the records). Validation has its own timer and is not part
 * of the step: its row says how often it ran and has no share. In the async modes (a trained group lagged a version)
 * generation runs beside the trainer: its rows are marked overlapped and "other" is the step less the trainer's parts.
 */
import { fitTable, fmt, painter, pct, type Look } from "./output.js";
import { median } from "./curves.js";
import type { MetricsRow } from "./source.js";

/** The parts of a step, in the order it runs them; each measured separately, none inside another. */
export const BUDGET_COMPONENTS: ReadonlyArray<{ name: string; key: string }> = [
  { name: "generation: engine busy", key: "timing_s/gen_engine_busy" },
  { name: "generation: client", key: "timing_s/gen_client" },
  { name: "batch write (CLI)", key: "timing_s/batch_write" },
  { name: "batch read (worker)", key: "timing_s/batch_read" },
  { name: "log-probs: actor", key: "timing_s/old_log_prob_actor" },
  { name: "log-probs: reference", key: "timing_s/ref" },
  { name: "log-probs: gather, save", key: "timing_s/log_prob_save" },
  { name: "update: forward/backward", key: "timing_s/forward_backward" },
  { name: "update: optimizer", key: "timing_s/optimizer" },
  { name: "sync waits for the next batch", key: "timing_s/wait_gen" },
  { name: "weight sync", key: "timing_s/update_weights" },
  { name: "record (rollouts file)", key: "timing_s/record" },
];

/** Runs from before the split had only the whole generation time. */
const WHOLE_GENERATION = { name: "generation", key: "timing_s/gen" };
/** The split generation rows (engine busy, client): BUDGET_COMPONENTS' first two. */
const SPLIT_GENERATION = BUDGET_COMPONENTS.slice(0, 2);
const GENERATION_KEYS = new Set([WHOLE_GENERATION.key, ...SPLIT_GENERATION.map((c) => c.key)]);

export interface BudgetRow {
  name: string;
  /** The metrics.jsonl key; null for "other". */
  key: string | null;
  median: number;
  mean: number;
  /** Of the mean step; null for validation, which is not part of the step. */
  share: number | null;
  /** Steps the value comes from (validation: the steps that validated). */
  steps: number;
  /** Generation that ran beside the trainer (async_training): not part of the step's sum, nor of "other". */
  overlapped: boolean;
}

export interface StepBudget {
  /** Steps with a timing_s/step. */
  steps: number;
  step: { median: number; mean: number };
  /** Generation ran beside the trainer in some step (a trained group lagged a version). */
  overlapped: boolean;
  rows: BudgetRow[];
}

const average = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** The budget over the steps that have a timing_s/step; null when none does. */
export function stepBudget(rows: readonly MetricsRow[]): StepBudget | null {
  const steps = rows.filter((r) => r.values["timing_s/step"] !== undefined);
  if (steps.length === 0) return null;
  const stepTimes = steps.map((r) => r.values["timing_s/step"]!);
  const stepMean = average(stepTimes);
  const split = steps.some((r) => r.values["timing_s/gen_engine_busy"] !== undefined);
  const components = split ? BUDGET_COMPONENTS : [WHOLE_GENERATION, ...BUDGET_COMPONENTS.slice(SPLIT_GENERATION.length)];
  const overlapped = steps.some((r) => (r.values["async/staleness_max"] ?? 0) > 0);
  const out: BudgetRow[] = [];
  for (const { name, key } of components) {
    if (!steps.some((r) => r.values[key] !== undefined)) continue;
    // A step without the key did not run that part (no reference, a step without a sync): 0 s.
    const values = steps.map((r) => r.values[key] ?? 0);
    const share = stepMean > 0 ? average(values) / stepMean : null;
    out.push({ name, key, median: median(values), mean: average(values), share, steps: steps.length, overlapped: overlapped && GENERATION_KEYS.has(key) });
  }
  const summed = out.filter((row) => !row.overlapped);
  const other = steps.map((r, i) => stepTimes[i]! - summed.reduce((sum, row) => sum + (r.values[row.key!] ?? 0), 0));
  const otherShare = stepMean > 0 ? average(other) / stepMean : null;
  out.push({ name: "other", key: null, median: median(other), mean: average(other), share: otherShare, steps: steps.length, overlapped: false });
  const testing = rows.filter((r) => r.values["timing_s/testing"] !== undefined).map((r) => r.values["timing_s/testing"]!);
  if (testing.length > 0) {
    const row = { name: "validation (not in the step)", key: "timing_s/testing", median: median(testing), mean: average(testing) };
    out.push({ ...row, share: null, steps: testing.length, overlapped: false });
  }
  return { steps: steps.length, step: { median: median(stepTimes), mean: stepMean }, overlapped, rows: out };
}

export function renderBudget(budget: StepBudget, look: Look): string {
  const p = painter(look);
  const title = p.bold(
    `step budget over ${budget.steps} step${budget.steps === 1 ? "" : "s"}: median step ${fmt(budget.step.median, 3)} s (mean ${fmt(budget.step.mean, 3)} s)`,
  );
  const rows = budget.rows.map((r) => [
    r.key === "timing_s/testing" ? `${r.name}, ${r.steps}×` : r.name,
    fmt(r.median, 3),
    fmt(r.mean, 3),
    r.share === null ? "–" : r.overlapped ? `${pct(r.share)}, overlapped` : pct(r.share),
  ]);
  const note = budget.overlapped ? "\ngeneration ran beside the trainer (async_training): its rows overlap the others and are not in \"other\"" : "";
  return `${title}\n${fitTable(look, ["component", "median s", "mean s", "share of step"], rows)}${note}`;
}
