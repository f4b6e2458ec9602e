/**
 * async_training.mode end to end on the CPU demo (embedded engine, training worker), kept short:
 * - one_step_off, 3 steps: the run completes; step 1 trains on the starting weights (staleness 0) and every later step
 *   on a batch generated one version back (staleness 1); the steps use the prompts of the seeded data order in the
 *   order sync would; the metrics line carries the idle ratios.
 * - fully_async, 3 steps, staleness_threshold 1: the run completes, no trained group lags more than one version,
 *   and no prompt's group is trained twice.
 * The scheduler's own rules (overlap, drops, admission) are test/async-schedule.test.ts's, with fakes.
 */
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { runCli, REPO_ROOT } from "./helpers/cli.js";
import { DEMO_CONFIG, readMetrics, readStep, type Metrics } from "./helpers/train.js";
import { tempDir } from "./helpers/tmp.js";
import { readPrompts } from "../src/rollout/sample.js";
import { DataCursor } from "../src/train/data-cursor.js";
import type { Trajectory } from "../src/data/trajectory.js";

const STEPS = 3;
const GROUPS = 4; // the fixture's train_batch_size
const scratch = tempDir("train-async");

async function train(mode: string, extra: string[] = []): Promise<{ runDir: string; metrics: Metrics[]; steps: Trajectory[][] }> {
  const runDir = path.join(scratch, mode);
  const result = await runCli(
    [
      "train", "--config", DEMO_CONFIG, "--quiet",
      "--set", `trainer.default_local_dir=${runDir}`,
      "--set", `trainer.total_training_steps=${STEPS}`,
      "--set", "trainer.test_freq=-1",
      "--set", `async_training.mode=${mode}`,
      ...extra,
    ],
    { timeoutMs: 240_000 },
  );
  expect(result.code, result.stderr).toBe(0);
  const steps: Trajectory[][] = [];
  for (let step = 1; step <= STEPS; step++) steps.push(await readStep(runDir, step));
  return { runDir, metrics: readMetrics(runDir), steps };
}

/** Each step's prompts as sync takes them: the seeded cursor, train_batch_size at a time (data.seed 1, shuffled). */
async function syncOrder(): Promise<number[][]> {
  const prompts = [];
  for await (const p of readPrompts(path.join(REPO_ROOT, "examples", "cpu-demo", "data", "train.parquet"))) prompts.push(p);
  const cursor = new DataCursor(prompts.length, 1, true);
  return Array.from({ length: STEPS }, () => cursor.next(GROUPS).map((i) => prompts[i]!.dataIndex).sort((a, b) => a - b));
}

const trainedIds = (steps: Trajectory[][]) => steps.map((s) => s.filter((t) => t.advantage != null));

describe("async_training.mode: one_step_off", () => {
  let run: Awaited<ReturnType<typeof train>>;
  beforeAll(async () => {
    run = await train("one_step_off");
  }, 300_000);

  it("trains step 1 on fresh samples and every later step one version stale", () => {
    expect(run.metrics.map((m) => m.step)).toEqual([1, 2, 3]);
    expect(run.metrics.map((m) => m["async/staleness_max"])).toEqual([0, 1, 1]);
    expect(run.metrics.map((m) => m["async/dropped_stale"])).toEqual([0, 0, 0]);
    expect(run.metrics.map((m) => m.weight_version)).toEqual([1, 2, 3]);
    for (const m of run.metrics) {
      expect(m["trainer/idle_ratio"]).toBeGreaterThanOrEqual(0);
      expect(m["rollouter/idle_ratio"]).toBeLessThanOrEqual(1);
    }
  });

  it("uses the prompts of the seeded data order, step by step, as sync would", async () => {
    const order = run.steps.map((s) => [...new Set(s.map((t) => t.data_index))].sort((a, b) => a - b));
    expect(order).toEqual(await syncOrder());
  });
});

describe("async_training.mode: fully_async", () => {
  let run: Awaited<ReturnType<typeof train>>;
  beforeAll(async () => {
    run = await train("fully_async", ["--set", "async_training.staleness_threshold=1"]);
  }, 300_000);

  it("trains every step within one version of its samples, each prompt's group once", () => {
    expect(run.metrics.map((m) => m.step)).toEqual([1, 2, 3]);
    for (const m of run.metrics) expect(m["async/staleness_max"]).toBeLessThanOrEqual(1);
    const groups = trainedIds(run.steps).flat().map((t) => t.group_id);
    const perStep = trainedIds(run.steps).map((s) => new Set(s.map((t) => t.group_id)).size);
    expect(perStep.every((n) => n > 0 && n <= GROUPS)).toBe(true);
    expect(new Set(groups).size).toBe(perStep.reduce((a, b) => a + b, 0)); // no group in two steps
  });
});
