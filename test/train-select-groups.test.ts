/**
 * selectGroups decides what a GRPO step trains on: aborted (over-sampling, deadline) and failed trajectories never,
 * groups left with one member never when n > 1, equal-reward groups not under dynamic sampling; and it lists what it
 * keeps in prompt and sample order, so that the same seeds give the same mini-batches.
 */
import { describe, expect, it } from "vitest";
import { selectGroups } from "../src/train/select-groups.js";
import type { Trajectory } from "../src/data/trajectory.js";
import { makeTrajectory } from "./helpers/trajectories.js";

/** Group `g`, member `k`, with a reward and a status. */
const member = (g: number, k: number, reward: number, status: Trajectory["status"] = "completed", finish = "stop") =>
  makeTrajectory(g * 10 + k, { id: `${g}:${k}`, group_id: `g${g}`, reward, status, finish_reason: finish });

describe("selectGroups", () => {
  it("leaves over-sampling aborts out of the batch and out of their group", () => {
    const batch = [
      member(0, 0, 1), member(0, 1, 0), member(0, 2, 0, "aborted", "over_sample"), member(0, 3, 1),
      member(1, 0, 0), member(1, 1, 1), member(1, 2, 1, "failed", "error"), member(1, 3, 0, "aborted", "deadline"),
    ];
    const s = selectGroups(batch, { n: 4, dropEqualRewards: false, maxGroups: 10 });
    expect(s.kept.map((t) => t.id)).toEqual(["0:0", "0:1", "0:3", "1:0", "1:1"]);
    expect(s.keptGroups).toBe(2);
    expect(s.kept.every((t) => t.status === "completed")).toBe(true);
  });

  it("drops a group left with one trainable member when n > 1, and keeps singletons when n = 1", () => {
    const batch = [member(0, 0, 1), member(0, 1, 0, "aborted", "over_sample"), member(1, 0, 0), member(1, 1, 1)];
    const grouped = selectGroups(batch, { n: 2, dropEqualRewards: false, maxGroups: 10 });
    expect(grouped.loneGroups).toBe(1);
    expect(grouped.kept.map((t) => t.id)).toEqual(["1:0", "1:1"]);
    const single = selectGroups([member(0, 0, 1), member(1, 0, 0)], { n: 1, dropEqualRewards: false, maxGroups: 10 });
    expect(single.loneGroups).toBe(0);
    expect(single.keptGroups).toBe(2);
  });

  it("drops equal-reward groups only under dynamic sampling, and stops at maxGroups", () => {
    const batch = [member(0, 0, 1), member(0, 1, 1), member(1, 0, 0), member(1, 1, 1), member(2, 0, 1), member(2, 1, 0)];
    const filtered = selectGroups(batch, { n: 2, dropEqualRewards: true, maxGroups: 1 });
    expect(filtered.equalRewardGroups).toBe(1);
    expect(filtered.keptGroups).toBe(1);
    expect(filtered.kept.map((t) => t.group_id)).toEqual(["g1", "g1"]);
    const all = selectGroups(batch, { n: 2, dropEqualRewards: false, maxGroups: 10 });
    expect(all.keptGroups).toBe(3);
  });

  it("keeps the first groups to finish, and lists them in prompt and sample order, however they finished", () => {
    // Prompt p's sample k, for a group of n = 2 per prompt.
    const sample = (p: number, k: number) => makeTrajectory(0, { id: `${p}:${k}`, group_id: `1.0.${p}`, data_index: 10 + p, sample_index: k, reward: k });
    const finished = [sample(2, 1), sample(0, 1), sample(2, 0), sample(1, 0), sample(0, 0), sample(1, 1)];
    const all = selectGroups(finished, { n: 2, dropEqualRewards: false, maxGroups: 10 });
    expect(all.kept.map((t) => t.id)).toEqual(["0:0", "0:1", "1:0", "1:1", "2:0", "2:1"]);
    // maxGroups: groups 2 and 0 were the first to start finishing; their trajectories still train in prompt order.
    const first = selectGroups(finished, { n: 2, dropEqualRewards: false, maxGroups: 2 });
    expect(first.kept.map((t) => t.id)).toEqual(["0:0", "0:1", "2:0", "2:1"]);
  });
});
