/**
 * The three ways `agentrl train` interleaves generation and training (async_training.mode), and the staleness each
 * allows. Staleness is counted in policy versions: trained version − the version a group started with.
 */
export const TRAINING_MODES = ["sync", "one_step_off", "fully_async"] as const;
export type TrainingMode = (typeof TRAINING_MODES)[number];

/**
 * The most policy versions a trained group may lag. one_step_off lags exactly one by construction; fully_async drops
 * what lags more than ceil(staleness_threshold), so the threshold's fraction (verl's unit: batches generated ahead)
 * and the bound (versions) never disagree on a whole number.
 */
export function maxStaleness(mode: TrainingMode, stalenessThreshold: number): number {
  if (mode === "sync") return 0;
  if (mode === "one_step_off") return 1;
  return Math.ceil(stalenessThreshold);
}
