/**
 * The engine counters of a run whose trajectories ran in several threads, each with its own SGLang client: one
 * EngineStats as if one client had sent every request, for the closing summary.
 */
import type { EngineStats } from "../../engine/index.js";

function addCounts<K extends string>(into: Record<K, number>, from: Record<K, number>): Record<K, number> {
  const sum = { ...into };
  for (const key of Object.keys(from) as K[]) sum[key] = (sum[key] ?? 0) + from[key];
  return sum;
}

/**
 * Counts add up (requests, failures). In flight per server is every thread's view of the one shared pool, so it is
 * taken once. The adaptive limits are per thread, so the run's limit is their sum and its lowest the sum of their
 * lowest: what the servers saw at most at once, at best and at worst.
 */
export function mergeEngineStats(all: readonly EngineStats[]): EngineStats {
  const zero: EngineStats = {
    requests: 0,
    retries: 0,
    successes: 0,
    abortedByCaller: 0,
    failures: {} as EngineStats["failures"],
    attemptErrors: {} as EngineStats["attemptErrors"],
    inFlight: {},
    concurrency: { limit: 0, lowest: 0, decreases: 0, waiting: 0 },
  };
  return all.reduce(
    (sum, one) => ({
      requests: sum.requests + one.requests,
      retries: sum.retries + one.retries,
      successes: sum.successes + one.successes,
      abortedByCaller: sum.abortedByCaller + one.abortedByCaller,
      failures: addCounts(sum.failures, one.failures),
      attemptErrors: addCounts(sum.attemptErrors, one.attemptErrors),
      inFlight: sum === zero ? one.inFlight : sum.inFlight,
      concurrency: addCounts(sum.concurrency, one.concurrency),
    }),
    zero,
  );
}
