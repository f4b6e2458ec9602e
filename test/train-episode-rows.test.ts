/**
 * An episode of several token sequences (an agent that rewrote its history) trains as several batch rows with one
 * episode id; its record still gets its main row's trainer log-probs and advantage.
 */
import { describe, expect, it } from "vitest";
import type { ContextSegment, Trajectory } from "../src/data/trajectory.js";
import type { TrainReporter } from "../src/train/reporter.js";
import { batchRows, updatePolicy } from "../src/train/update.js";
import { batchTensors, readSafetensors, writeSafetensors, type WorkerClient } from "../src/train/worker/index.js";
import { makeTrajectory } from "./helpers/trajectories.js";
import { tempDir } from "./helpers/tmp.js";

function segment(first: number): ContextSegment {
  return {
    prompt_ids: [first, first + 1],
    response_ids: [first + 2, first + 3, first + 4],
    response_mask: [1, 0, 1],
    response_logprobs: [-0.1, 0, -0.3],
    messages: [],
    reason: "history rewritten",
    drift: "match",
  };
}

/** Trajectories 0 and 2 of one sequence each, trajectory 1 with two context segments before its main sequence. */
function step(): Trajectory[] {
  const cut = makeTrajectory(1, { context_segments: [segment(100), segment(200)] });
  return [makeTrajectory(0), cut, makeTrajectory(2)];
}

describe("batchRows", () => {
  it("puts an episode's context segments before its main row, all with its reward, group and one episode id", () => {
    const { rows, mainRows } = batchRows(step());
    expect(mainRows).toEqual([0, 3, 4]);
    expect(rows.map((r) => r.ids[0])).toEqual([1, 100, 200, 1, 1]);
    expect(rows.map((r) => [r.reward, r.groupId, r.episodeId])).toEqual([
      [1, 0, undefined],
      [0, 0, 1],
      [0, 0, 1],
      [0, 0, 1],
      [0, 1, undefined],
    ]);
    expect(rows[1]).toMatchObject({ responseMask: [0, 0, 1, 0, 1], rolloutLogProbs: [0, 0, -0.1, 0, -0.3] });
    const episodes = batchTensors(rows, 0).episode_ids!;
    expect(episodes.dtype).toBe("I64");
    // The others get fresh ids above trajectory 1's: each its own episode.
    expect(Array.from(episodes.data as BigInt64Array)).toEqual([2n, 1n, 1n, 1n, 3n]);
  });

  it("without context segments is one row per trajectory and writes no episode_ids", () => {
    const trajectories = [makeTrajectory(0), makeTrajectory(1, { context_segments: null } as Partial<Trajectory>)];
    const { rows, mainRows } = batchRows(trajectories);
    expect(mainRows).toEqual([0, 1]);
    expect(rows.every((r) => !("episodeId" in r))).toBe(true);
    expect(rows[1]).toEqual({
      ids: [1, 2, 3, 1, 10, 11, 12, 13, 14],
      responseMask: [0, 0, 0, 0, 1, 1, 0, 0, 1],
      reward: 0,
      groupId: 0,
      rolloutLogProbs: [0, 0, 0, 0, -0.5, -0.25, 0, 0, -1],
    });
    expect(Object.keys(batchTensors(rows, 0))).not.toContain("episode_ids");
  });
});

describe("updatePolicy", () => {
  it("gives each record its main row's trainer log-probs and advantage", async () => {
    const dir = tempDir("episode-rows");
    // The fake worker's log-prob of row r, column c is -(r + c / 100); its advantage of row r is 10 r.
    let batchSize = 0;
    const worker = {
      async computeLogProbs(batch: string, out: string) {
        const [rows, width] = (await readSafetensors(batch)).input_ids!.shape as [number, number];
        batchSize = rows;
        const value = (i: number) => -(Math.floor(i / width) + (i % width) / 100);
        const data = Float32Array.from({ length: rows * width }, (_, i) => value(i));
        await writeSafetensors(out, { old_log_probs: { dtype: "F32", shape: [rows, width], data } });
        return { path: out, metrics: {} };
      },
      async update() {
        return { step: 1, metrics: {}, advantages: Array.from({ length: batchSize }, (_, row) => 10 * row) };
      },
    } as unknown as WorkerClient;
    const reporter = { phase() {} } as unknown as TrainReporter;
    const kept = step();
    await updatePolicy(1, kept, worker, { scratchDir: dir, padTokenId: 0, reporter });
    expect(batchSize).toBe(5);
    expect(kept.map((t) => t.advantage)).toEqual([0, 30, 40]);
    // Trajectory 1's response starts at column 4 of row 3.
    expect(kept[1]!.trainer_logprobs).toEqual(Array.from(Float32Array.from([-3.04, -3.05, -3.06, -3.07, -3.08])));
  });
});
