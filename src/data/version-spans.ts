/**
 * Reading a trajectory's version_spans: which policy versions sampled its tokens, and how stale they were when
 * trained. One helper for the step metrics and for `agentrl inspect`, so both count the same way.
 */
import type { Trajectory } from "./trajectory.js";

/** Sampled tokens per weight version, in the order the versions first sampled. Empty for files without spans. */
export function tokensByVersion(t: Pick<Trajectory, "version_spans">): Map<string | null, number> {
  const counts = new Map<string | null, number>();
  for (const span of t.version_spans ?? []) counts.set(span.weight_version, (counts.get(span.weight_version) ?? 0) + span.end - span.start);
  return counts;
}

/** A training step's weight version as a number (agentrl tags versions with the step); null for "default" and the like. */
export function versionNumber(version: string | null): number | null {
  if (version === null || !/^\d+$/.test(version)) return null;
  return Number(version);
}

/**
 * Token staleness of the trajectories an update trains on, starting from policy version `trainedFrom` (step − 1):
 * the mean and max over sampled tokens of trainedFrom − the token's version ("default", the starting weights, is 0),
 * and the share of trajectories sampled by more than one version (continued across a weight update).
 */
export function tokenStaleness(trajectories: readonly Pick<Trajectory, "version_spans">[], trainedFrom: number): {
  mean: number;
  max: number;
  partialFraction: number;
} {
  let tokens = 0;
  let weighted = 0;
  let max = 0;
  let partial = 0;
  for (const t of trajectories) {
    const counts = tokensByVersion(t);
    if (counts.size > 1) partial += 1;
    for (const [version, n] of counts) {
      const staleness = Math.max(0, trainedFrom - (version === "default" ? 0 : (versionNumber(version) ?? trainedFrom)));
      tokens += n;
      weighted += staleness * n;
      if (n > 0) max = Math.max(max, staleness);
    }
  }
  return { mean: tokens ? weighted / tokens : 0, max, partialFraction: trajectories.length ? partial / trajectories.length : 0 };
}
