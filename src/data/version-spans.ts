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

/**
 * A weight version as a policy version number: agentrl tags each sync with its step, and "default" (the weights the
 * engine started with) is version 0. Null for anything else (a server's own tags).
 */
export function policyVersion(version: string | null): number | null {
  if (version === "default") return 0;
  if (version === null || !/^\d+$/.test(version)) return null;
  return Number(version);
}

/**
 * The staleness of one trajectory's tokens, from `tokensByVersion`, when trained starting from policy version
 * `trainedFrom` (step − 1): trainedFrom − the version that sampled each token (a version policyVersion cannot read
 * counts as fresh). `weighted` is the sum over tokens, for means across trajectories.
 */
export function countsStaleness(counts: Map<string | null, number>, trainedFrom: number): { tokens: number; weighted: number; max: number } {
  let tokens = 0;
  let weighted = 0;
  let max = 0;
  for (const [version, n] of counts) {
    const staleness = Math.max(0, trainedFrom - (policyVersion(version) ?? trainedFrom));
    tokens += n;
    weighted += staleness * n;
    if (n > 0) max = Math.max(max, staleness);
  }
  return { tokens, weighted, max };
}

/**
 * Token staleness of the trajectories an update trains on, starting from policy version `trainedFrom` (step − 1):
 * the mean and max over sampled tokens, and the share of trajectories sampled by more than one version (continued
 * across a weight update).
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
    const one = countsStaleness(counts, trainedFrom);
    tokens += one.tokens;
    weighted += one.weighted;
    max = Math.max(max, one.max);
  }
  return { mean: tokens ? weighted / tokens : 0, max, partialFraction: trajectories.length ? partial / trajectories.length : 0 };
}
