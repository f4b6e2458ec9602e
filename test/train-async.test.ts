/**
 * async_training.mode end to end on the CPU demo (embedded engine, training worker), kept short:
 * - one_step_off without partial rollouts, 3 steps with a validation, run twice at once: each run
 *   completes; step 1 trains on the starting weights (staleness 0) and every later step on a batch generated one
 *   version back (staleness 1), every token of it by that version; the steps use the prompts of the seeded data order
 *   in the order sync would; the metrics line carries the idle ratios; and the two runs log the same metrics line for
 *   line, but for the clock and the engine's rounding in mismatch/kl (issue 29, item 6).
 * - fully_async, 4 steps, staleness_threshold 1, trigger_parameter_sync_step 2, SIGKILLed mid-step and resumed: the
 *   checkpointed steps' samples are kept, each step trains once, no trained group lags more than one sync, no prompt's
 *   group is trained twice, across the kill; the engine gets the weights every second step of each run and after the
 *   last.
 * The scheduler's own rules (overlap, drops, admission) are test/async-schedule.test.ts's, with fakes.
 */
import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { runCli, REPO_ROOT } from "./helpers/cli.js";
import { DEMO_CONFIG, pollUntil, readMetrics, readStep, seededMetrics, startCli, stateStep, type Metrics } from "./helpers/train.js";
import { tempDir } from "./helpers/tmp.js";
import { readPrompts } from "../src/rollout/sample.js";
import { DataCursor, type CursorState } from "../src/train/data-cursor.js";
import type { Trajectory } from "../src/data/trajectory.js";

const STEPS = 3;
const GROUPS = 4; // the fixture's train_batch_size
const scratch = tempDir("train-async");

const trainArgs = (runDir: string, mode: string, steps = STEPS) => [
  "train", "--config", DEMO_CONFIG,
  "--set", `trainer.default_local_dir=${runDir}`,
  "--set", `trainer.total_training_steps=${steps}`,
  "--set", "trainer.test_freq=-1",
  "--set", `async_training.mode=${mode}`,
];

async function readRun(runDir: string, count: number): Promise<Trajectory[][]> {
  const steps: Trajectory[][] = [];
  for (let step = 1; step <= count; step++) steps.push(await readStep(runDir, step));
  return steps;
}

async function train(mode: string, extra: string[] = [], name = mode): Promise<{ runDir: string; metrics: Metrics[]; steps: Trajectory[][] }> {
  const runDir = path.join(scratch, name);
  const result = await runCli([...trainArgs(runDir, mode), "--quiet", ...extra], { timeoutMs: 240_000 });
  expect(result.code, result.stderr).toBe(0);
  return { runDir, metrics: readMetrics(runDir), steps: await readRun(runDir, STEPS) };
}

/** Each step's prompts as sync takes them: the seeded cursor, train_batch_size at a time (data.seed 1, shuffled). */
async function syncOrder(steps = STEPS): Promise<{ order: number[][]; cursorAfter: (step: number) => CursorState }> {
  const prompts = [];
  for await (const p of readPrompts(path.join(REPO_ROOT, "examples", "cpu-demo", "data", "train.parquet"))) prompts.push(p);
  const cursor = new DataCursor(prompts.length, 1, true);
  const order = Array.from({ length: steps }, () => cursor.next(GROUPS).map((i) => prompts[i]!.dataIndex).sort((a, b) => a - b));
  const cursorAfter = (step: number) => {
    const fresh = new DataCursor(prompts.length, 1, true);
    fresh.next(step * GROUPS);
    return fresh.position;
  };
  return { order, cursorAfter };
}

const promptsPerStep = (steps: Trajectory[][]) => steps.map((s) => [...new Set(s.map((t) => t.data_index))].sort((a, b) => a - b));

const trainedIds = (steps: Trajectory[][]) => steps.map((s) => s.filter((t) => t.advantage != null));

describe("async_training.mode: one_step_off without partial rollouts", () => {
  let run: Awaited<ReturnType<typeof train>>;
  let twin: Awaited<ReturnType<typeof train>>;
  beforeAll(async () => {
    // Validation after step 2 runs while nothing generates: the sync waited for step 3's batch. Four trajectories at a
    // time make each batch's generation outlast the update it overlaps, so that a sync that did not wait would land
    // inside it (and the trajectories started after it would be sampled by the new weights).
    const extra = ["--set", "async_training.partial_rollout=false", "--set", "trainer.test_freq=2", "--set", "actor_rollout_ref.rollout.max_concurrency=4"];
    [run, twin] = await Promise.all([train("one_step_off", extra), train("one_step_off", extra, "one_step_off-twin")]);
  }, 300_000);

  it("trains step 1 on fresh samples and every later step one version stale, every token by that version", () => {
    expect(run.metrics.map((m) => m.step)).toEqual([1, 2, 3]);
    expect(run.metrics.map((m) => m["async/staleness_max"])).toEqual([0, 1, 1]);
    expect(run.metrics.map((m) => m["async/token_staleness_mean"])).toEqual([0, 1, 1]);
    expect(run.metrics.map((m) => m["async/token_staleness_max"])).toEqual([0, 1, 1]);
    expect(run.metrics.map((m) => m["async/partial_rollout_frac"])).toEqual([0, 0, 0]);
    expect(run.metrics.map((m) => m["async/dropped_stale"])).toEqual([0, 0, 0]);
    expect(run.metrics.map((m) => m.weight_version)).toEqual([1, 2, 3]);
    for (const m of run.metrics) {
      expect(m["trainer/idle_ratio"]).toBeGreaterThanOrEqual(0);
      expect(m["rollouter/idle_ratio"]).toBeLessThanOrEqual(1);
    }
  });

  it("uses the prompts of the seeded data order, step by step, as sync would", async () => {
    expect(promptsPerStep(run.steps)).toEqual((await syncOrder()).order);
  });

  it("repeats itself: two runs with the same seeds, at the same time, log the same metrics line for line", () => {
    const withoutEngineRounding = ({ "mismatch/kl": _kl, "mismatch/k3": _k3, ...line }: Metrics) => line;
    const [a, b] = [seededMetrics(run.metrics), seededMetrics(twin.metrics)];
    expect(a.map(withoutEngineRounding)).toEqual(b.map(withoutEngineRounding));
    a.forEach((line, i) => expect(line["mismatch/kl"]).toBeCloseTo(b[i]!["mismatch/kl"]!, 6));
    expect(a.some((line) => line["val-core/agentrl/vault/acc/mean@1"] !== undefined)).toBe(true);
  });
});

describe("async_training.mode: one_step_off, stopped and resumed", () => {
  it("Ctrl-C while the next batch generates: the checkpoint's cursor gives that batch's prompts back; --resume takes them", async () => {
    const runDir = path.join(scratch, "one_step_off-stopped");
    // A checkpoint every step: each is written while the next step's batch is already drawn and generating.
    const args = [...trainArgs(runDir, "one_step_off", 4), "--json", "--set", "trainer.save_freq=1"];
    const run = startCli(args);
    expect(await pollUntil(() => run.steps().includes(1), { timeoutMs: 240_000, alive: run.running })).toBe(true);
    run.child.kill("SIGINT");
    const exit = await run.exited;
    expect(exit.code, run.stderr()).toBe(130);
    const stopped = stateStep(runDir);
    expect(stopped).toBeGreaterThanOrEqual(1);
    expect(stopped).toBeLessThan(4);
    const { order, cursorAfter } = await syncOrder(4);
    const state = JSON.parse(readFileSync(path.join(runDir, "state.json"), "utf8")) as { cursor: CursorState };
    expect(state.cursor).toEqual(cursorAfter(stopped));
    const again = await runCli([...args, "--resume"], { timeoutMs: 240_000 });
    expect(again.code, again.stderr).toBe(0);
    expect(readMetrics(runDir).map((m) => m.step)).toEqual([1, 2, 3, 4]);
    expect(promptsPerStep(await readRun(runDir, 4))).toEqual(order);
  }, 600_000);
});

describe("async_training.mode: fully_async, killed and resumed", () => {
  it("SIGKILL mid-step, then --resume: the checkpointed steps stay as trained, every step trains once, no group twice", async () => {
    const runDir = path.join(scratch, "fully_async-killed");
    const args = [
      ...trainArgs(runDir, "fully_async", 4), "--json", "--set", "trainer.save_freq=1", "--set", "async_training.staleness_threshold=1",
      // Checkpoints between syncs too: the resumed run must start the engine on the checkpoint's weights.
      "--set", "async_training.trigger_parameter_sync_step=2",
      // Requests carry SGLang's priority, and the embedded engine starts with --enable-priority-scheduling.
      "--set", "async_training.engine_priority=true",
    ];
    // Its own temp folder: whatever a killed run could leave there stays in the test's scratch folder.
    const killedTmp = path.join(scratch, "killed-tmp");
    mkdirSync(killedTmp);
    const run = startCli(args, { TMPDIR: killedTmp });
    // Killed once step 2 is reported (its checkpoint follows the report): step 3's groups are generating, some
    // finished and buffered, some in flight.
    expect(await pollUntil(() => run.steps().includes(2), { timeoutMs: 240_000, alive: run.running })).toBe(true);
    run.child.kill("SIGKILL");
    expect((await run.exited).signal).toBe("SIGKILL");
    const checkpointed = stateStep(runDir);
    expect(checkpointed).toBeGreaterThanOrEqual(1);
    expect(checkpointed).toBeLessThan(4);
    const before = await readRun(runDir, checkpointed);

    const again = await runCli([...args, "--resume"], { timeoutMs: 240_000 });
    expect(again.code, again.stderr).toBe(0);
    expect(readMetrics(runDir).map((m) => m.step)).toEqual([1, 2, 3, 4]);
    const steps = await readRun(runDir, 4);
    // What was trained and checkpointed before the kill is kept, sample for sample.
    expect(steps.slice(0, checkpointed).map((s) => s.map((t) => t.id))).toEqual(before.map((s) => s.map((t) => t.id)));
    const trained = trainedIds(steps).map((s) => [...new Set(s.map((t) => t.data_index))]);
    expect(trained.every((prompts) => prompts.length > 0)).toBe(true);
    const all = trained.flat();
    expect(new Set(all).size).toBe(all.length); // no prompt's group trained twice, across the kill
    // Within the bound on both sides of the kill: no trained group lags more than one sync (three updates).
    const metrics = readMetrics(runDir);
    for (const m of metrics) expect(m["async/sync_staleness_max"]).toBeLessThanOrEqual(1);
    for (const m of metrics) expect(m["async/staleness_max"]).toBeLessThanOrEqual(3);
    // Each run syncs after every second of its own steps and after the last; the resumed one counts from its first.
    const syncs = metrics.filter((m) => m["timing_s/update_weights"] !== undefined).map((m) => m.step);
    const expected = [1, 2, 3, 4].filter((s) => (s <= checkpointed ? s % 2 === 0 : (s - checkpointed) % 2 === 0 || s === 4));
    expect(syncs).toEqual(expected);
    // engine_priority: the embedded engine train started orders its waiting queue by the requests' priority.
    expect(readFileSync(path.join(runDir, "logs", "engine.log"), "utf8")).toMatch(/agentrl embedded engine serving .* \(cpu, torch\.float32, priority scheduling\)/);
    expect(trained.every((prompts) => prompts.length <= GROUPS)).toBe(true);
  }, 600_000);
});
