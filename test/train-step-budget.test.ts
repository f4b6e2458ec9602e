/**
 * The step budget's accounting on the trainer side of a step (src/train/step-trainer.ts), with fake stages and an
 * injected clock that each stage advances by a known amount, so the test asserts exact seconds and never wall time:
 * - timing_s/step covers generation, update, sync and the rollouts file, and leaves validation (timing_s/testing) and
 *   the checkpoint out;
 * - generation splits into the engine's busy time and the client's rest;
 * - the worker's two commands' batch reads add up.
 */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { generationTimings, stepTrainer, type TrainStages } from "../src/train/step-trainer.js";
import { workerMetrics, type UpdateResult } from "../src/train/update.js";
import type { RolloutBatch } from "../src/train/rollout.js";
import type { StepReport } from "../src/train/schedule/index.js";
import type { TrainReporter } from "../src/train/reporter.js";
import type { StepTrainerDeps } from "../src/train/step-trainer.js";
import { makeTrajectory } from "./helpers/trajectories.js";
import { tempDir } from "./helpers/tmp.js";

const quiet: TrainReporter = { phase() {}, rolloutProgress() {}, stepDone() {}, validationDone() {}, note() {} };
const report: StepReport = { staleness: [0], syncStaleness: [0], droppedStale: 0, trainerIdle: 0, generatorIdle: 0 };

/** Two steps of a run with test_freq 2 and a checkpoint every step; every stage advances the clock by its cost. */
function harness() {
  const clock = { now: 0 };
  const lines: Array<Record<string, number>> = [];
  const progress = { step: 0, weightVersion: "0", due: () => true };
  const update: UpdateResult = {
    metrics: { "timing_s/old_log_prob_actor": 0.1, "timing_s/forward_backward": 0.2 },
    timing: { "timing_s/batch_write": 0.01, "timing_s/old_log_prob": 0.15, "timing_s/update_actor": 0.25 },
  };
  const stages = {
    progress,
    update: async () => ((clock.now += 400), update),
    sync: async () => ((clock.now += 100), true),
    validate: async () => ((clock.now += 5_000), { "val-core/vault/acc/mean@1": 0.5 }),
    checkpoint: async () => void (clock.now += 2_000),
    record: (_step: number, metrics: Record<string, number>) => void lines.push(metrics),
  } as unknown as TrainStages;
  const dir = tempDir("step-budget");
  const deps: StepTrainerDeps = {
    config: { trainer: { test_freq: 2, save_freq: 1 }, data: { max_response_length: 8 } } as StepTrainerDeps["config"],
    runDir: { rolloutFile: (step: number) => path.join(dir, `step-${step}.parquet`) },
    reporter: quiet,
    stop: new AbortController().signal,
    clock: () => clock.now,
  };
  const trainer = stepTrainer(2, stages, { taken() {} }, deps);
  return { clock, lines, trainer };
}

function batch(seconds: number, engineBusySeconds: number): RolloutBatch {
  const kept = [makeTrajectory(0, { step: 1 })];
  return { kept, all: kept, keptGroups: 1, droppedGroups: 0, rounds: 1, overSampleAborted: 0, loneGroups: 0, seconds, engineBusySeconds };
}

describe("the step budget (step-trainer.ts)", () => {
  it("times the step without its validation and checkpoint; validation has timing_s/testing", async () => {
    const { clock, lines, trainer } = harness();
    for (const step of [1, 2]) {
      clock.now += 1_000; // the step's generation, as the schedule runs it before train()
      await trainer.train(step, batch(1, 0.75), true);
      await trainer.finish(step, batch(1, 0.75), report);
    }
    const [first, second] = lines;
    expect(first!["timing_s/testing"]).toBeUndefined(); // step 1 does not validate (test_freq 2)
    expect(second!["timing_s/testing"]).toBe(5);
    // Each step: 1 s generation + 0.4 s update + 0.1 s sync (+ the rollouts file, 0 s on this clock): the same 1.5 s
    // whether or not it validated, and step 2 does not pay for step 1's checkpoint.
    for (const line of [first!, second!]) {
      expect(line["timing_s/step"]).toBeCloseTo(1.5, 9);
      expect(line["timing_s/update_weights"]).toBeCloseTo(0.1, 9);
      expect(line["timing_s/record"]).toBe(0);
      expect(line).toMatchObject({ "timing_s/gen": 1, "timing_s/gen_engine_busy": 0.75, "timing_s/gen_client": 0.25 });
      expect(line).toMatchObject({ "timing_s/batch_write": 0.01, "timing_s/old_log_prob_actor": 0.1, "timing_s/forward_backward": 0.2 });
    }
    expect(second!["val-core/vault/acc/mean@1"]).toBe(0.5);
  });

  it("syncs only once the wait it is given has ended, and times the wait as timing_s/wait_gen", async () => {
    const { clock, lines, trainer } = harness();
    let release!: () => void;
    const nextBatch = new Promise<void>((resolve) => (release = resolve));
    const training = trainer.train(1, batch(1, 1), true, () => nextBatch.then(() => void (clock.now += 300)));
    await new Promise((resolve) => setImmediate(resolve));
    expect(clock.now).toBe(400); // updated, not synced: the wait is open
    release();
    await training;
    await trainer.finish(1, batch(1, 1), report);
    expect(lines[0]).toMatchObject({ "timing_s/wait_gen": 0.3, "timing_s/update_weights": 0.1 });
  });

  it("splits generation into the engine's busy time and the client's rest, never below 0", () => {
    expect(generationTimings({ seconds: 2, engineBusySeconds: 0.5 })).toEqual({
      "timing_s/gen": 2, "timing_s/gen_engine_busy": 0.5, "timing_s/gen_client": 1.5,
    });
    // Busy read a hair past the window's end: the client's share is 0, not negative.
    expect(generationTimings({ seconds: 1, engineBusySeconds: 1.001 })).toEqual({
      "timing_s/gen": 1, "timing_s/gen_engine_busy": 1, "timing_s/gen_client": 0,
    });
  });

  it("adds up the batch reads of the log-prob pass and the update; the other worker timings pass through", () => {
    const merged = workerMetrics(
      { "timing_s/batch_read": 0.02, "timing_s/ref": 0.3, "actor/entropy": 1 },
      { "timing_s/batch_read": 0.03, "timing_s/optimizer": 0.1, "actor/pg_loss": 0.5 },
    );
    expect(merged["timing_s/batch_read"]).toBeCloseTo(0.05, 12);
    expect(merged).toMatchObject({ "timing_s/ref": 0.3, "timing_s/optimizer": 0.1, "actor/entropy": 1, "actor/pg_loss": 0.5 });
    expect(workerMetrics({ a: 1 }, { b: 2 })).toEqual({ a: 1, b: 2 });
  });
});
