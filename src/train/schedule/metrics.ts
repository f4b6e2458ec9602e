/** A step's schedule as metrics lines: verl's idle-ratio names, and agentrl's staleness and drop counts. */
import type { StepReport } from "./types.js";

export function stepScheduleMetrics(report: StepReport): Record<string, number> {
  const { staleness, syncStaleness } = report;
  return {
    "async/staleness_mean": mean(staleness),
    "async/staleness_max": max(staleness),
    "async/sync_staleness_max": max(syncStaleness),
    "async/dropped_stale": report.droppedStale,
    "trainer/idle_ratio": report.trainerIdle,
    "rollouter/idle_ratio": report.generatorIdle,
  };
}

const mean = (xs: number[]): number => (xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : 0);
const max = (xs: number[]): number => (xs.length ? Math.max(...xs) : 0);
