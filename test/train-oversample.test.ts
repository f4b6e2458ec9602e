/**
 * over_sample_rate inside `agentrl train` (CPU demo, 2 steps): each step's rollout stops once (1 - rate) of its
 * trajectories have finished; the aborted ones are written to the step's rollouts with finish_reason over_sample,
 * get no advantage (never trained on), and are counted in the step's metrics.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { runCli } from "./helpers/cli.js";
import { demoTwoSteps, readMetrics, readStep, type Metrics } from "./helpers/train.js";
import type { Trajectory } from "../src/data/trajectory.js";
import { tempDir } from "./helpers/tmp.js";

const runDir = path.join(tempDir("train-oversample"), "run");
let metrics: Metrics[];
const steps: Trajectory[][] = [];

beforeAll(async () => {
  // The demo has 4 prompts × n = 8 = 32 trajectories per step, all in flight: rate 0.25 keeps the first 24.
  const result = await runCli(demoTwoSteps(runDir, ["--quiet"], { "actor_rollout_ref.rollout.over_sample_rate": 0.25 }), { timeoutMs: 240_000 });
  expect(result.code, result.stderr).toBe(0);
  expect(existsSync(path.join(runDir, ".scratch"))).toBe(false); // the step files are gone with the run
  metrics = readMetrics(runDir);
  for (const step of [1, 2]) steps.push(await readStep(runDir, step));
}, 300_000);

describe("agentrl train with over_sample_rate", () => {
  it("aborts the last quarter of each step's trajectories and records them", () => {
    for (const trajectories of steps) {
      expect(trajectories).toHaveLength(32);
      const aborted = trajectories.filter((t) => t.finish_reason === "over_sample");
      expect(aborted).toHaveLength(8);
      expect(aborted.every((t) => t.status === "aborted")).toBe(true);
    }
    expect(metrics.map((m) => m["batch/over_sample_aborted"])).toEqual([8, 8]);
  });

  it("trains only on the trajectories that finished", () => {
    steps.forEach((trajectories, i) => {
      const trained = trajectories.filter((t) => t.advantage !== null && t.advantage !== undefined);
      expect(trained.every((t) => t.finish_reason !== "over_sample")).toBe(true);
      expect(trajectories.filter((t) => t.finish_reason === "over_sample").every((t) => t.advantage == null)).toBe(true);
      expect(metrics[i]!["batch/trajectories"]).toBe(trained.length);
      expect(trained.length).toBeLessThanOrEqual(24);
      expect(trained.length).toBeGreaterThan(0);
    });
  });
});
