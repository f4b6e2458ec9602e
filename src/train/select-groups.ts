/**
 * Which of a rollout round's trajectories a GRPO step trains on, group by group. Aborted (deadline, over-sampling)
 * and failed trajectories never are, and they leave their group's statistics; a group left with one member has no
 * baseline when n > 1; with dynamic sampling (verl's filter_groups) a group whose rewards are all equal carries no
 * signal and is dropped so the round can be refilled.
 */
import { sampleOrder, type Trajectory } from "../data/trajectory.js";

export interface GroupSelection {
  kept: Trajectory[];
  keptGroups: number;
  /** Dropped by dynamic sampling (equal rewards). */
  equalRewardGroups: number;
  /** Left with one trainable member (n > 1). */
  loneGroups: number;
}

export function selectGroups(
  trajectories: readonly Trajectory[],
  options: { n: number; dropEqualRewards: boolean; maxGroups: number },
): GroupSelection {
  const groups = new Map<string, Trajectory[]>();
  for (const t of trajectories) groups.set(t.group_id, [...(groups.get(t.group_id) ?? []), t]);
  const out: GroupSelection = { kept: [], keptGroups: 0, equalRewardGroups: 0, loneGroups: 0 };
  for (const group of groups.values()) {
    const trainable = group.filter((t) => t.status !== "failed" && t.status !== "aborted");
    if (trainable.length === 0) continue;
    if (options.n > 1 && trainable.length < 2) {
      out.loneGroups += 1;
      continue;
    }
    if (options.dropEqualRewards && trainable.every((t) => t.reward === trainable[0]!.reward)) {
      out.equalRewardGroups += 1;
      continue;
    }
    if (out.keptGroups >= options.maxGroups) continue;
    out.kept.push(...trainable);
    out.keptGroups += 1;
  }
  // Which groups are kept follows the finish order (over-sampling keeps the first to finish); the order they train in
  // does not: mini-batches are cut from this list, so a list in finish order made two runs with the same seeds train
  // on different mini-batches (issue 29, item 6).
  out.kept.sort(sampleOrder);
  return out;
}
