/** A step's schedule as metrics lines: verl's idle-ratio names, and agentrl's staleness and drop counts. */
import type { StepReport } from "./types.js";

export function stepScheduleMetrics(report: StepReport): Record<string, number> {
  const { staleness } = report;
  return {
    "async/staleness_mean": staleness.length ? staleness.reduce((s, x) => s + x, 0) / staleness.length : 0,
    "async/staleness_max": staleness.length ? Math.max(...staleness) : 0,
    "async/dropped_stale": report.droppedStale,
    "trainer/idle_ratio": report.trainerIdle,
    "rollouter/idle_ratio": report.generatorIdle,
  };
}
