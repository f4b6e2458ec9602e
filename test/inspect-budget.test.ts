/**
 * `agentrl inspect RUN`'s step budget (src/inspect/budget.ts) for a run whose generation ran beside the trainer
 * (async_training.mode one_step_off): the generation rows are marked overlapped and left out of "other", which is the
 * step less the trainer's own parts; a sync run's budget adds every part (test/inspect-e2e.test.ts).
 */
import { describe, expect, it } from "vitest";
import { renderBudget, stepBudget } from "../src/inspect/budget.js";
import type { MetricsRow } from "../src/inspect/source.js";

/** Step 1 trains fresh samples (staleness 0), steps 2-3 samples a version old, generated during the update before. */
const rows: MetricsRow[] = [1, 2, 3].map((step) => ({
  step,
  values: {
    "timing_s/step": 0.5,
    "timing_s/gen_engine_busy": 0.4,
    "timing_s/gen_client": 0.02,
    "timing_s/forward_backward": 0.3,
    "timing_s/wait_gen": 0.1,
    "timing_s/update_weights": 0.05,
    "async/staleness_max": step === 1 ? 0 : 1,
  },
}));

describe("the step budget of an overlapped run", () => {
  it("marks generation overlapped and leaves it out of other", () => {
    const budget = stepBudget(rows)!;
    expect(budget.overlapped).toBe(true);
    const row = (key: string | null) => budget.rows.find((r) => r.key === key)!;
    expect(row("timing_s/gen_engine_busy").overlapped).toBe(true);
    expect(row("timing_s/forward_backward").overlapped).toBe(false);
    // 0.5 s a step: 0.3 update + 0.1 waiting for the next batch + 0.05 sync, and 0.05 no part measured.
    expect(row(null).median).toBeCloseTo(0.05, 9);
    const table = renderBudget(budget, { color: false, width: 120 });
    expect(table).toMatch(/generation: engine busy\s+│ 0\.400\s+│ 0\.400\s+│ 80\.0%, overlapped/);
    expect(table).toContain("generation ran beside the trainer");
  });

  it("adds every part when nothing lagged (sync mode)", () => {
    const budget = stepBudget(rows.map((r) => ({ ...r, values: { ...r.values, "async/staleness_max": 0 } })))!;
    expect(budget.overlapped).toBe(false);
    expect(budget.rows.every((r) => !r.overlapped)).toBe(true);
    expect(budget.rows.find((r) => r.key === null)!.median).toBeCloseTo(0.5 - 0.42 - 0.45, 9);
  });
});
