/**
 * The CPU demo's two stages, shortened (issue 14, part 2), run as `npm run demo` runs them: `agentrl sft` on the
 * committed demonstrations of the imperfect teacher, then `agentrl train` from its model with the correctness-only
 * reward. Greedy validation accuracy on the 100 test vaults must start well short of the task (the warm start answers
 * the teacher's wrong digit more often than the right one) and rise under GRPO, 20 of the demo's 40 steps. The SFT
 * stage is the committed config, unshortened; the GRPO stage runs in the demo's mode (sync, which repeats itself line
 * for line on one machine), and the margins come from several seeds on two machines (docs/cpu-demo.md), since another
 * machine's float rounding can move a run. The same GRPO stage run fully async
 * (async_training.mode) must raise its sampled accuracy by the same margin at its best, and its greedy accuracy.
 */
import path from "node:path";
import { expect, it } from "vitest";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { readMetrics } from "./helpers/train.js";
import { tempDir } from "./helpers/tmp.js";

const scratch = tempDir("demo-learns");

const ACC = "val-core/agentrl/vault/acc/mean@1";
const TRAIN_ACC = "acc/mean";
/** Half of the demo's 40 steps: greedy accuracy was 0.91-1.00 there in every run so far (docs/cpu-demo.md). */
const STEPS = 20;
const REWARD = "val-core/agentrl/vault/reward/mean@1";

it("SFT warm start, then GRPO raises greedy accuracy", async () => {
  const sftDir = path.join(scratch, "sft");
  const sft = await runCli(
    ["sft", "--config", path.join(REPO_ROOT, "examples", "cpu-demo-sft.yaml"), "--quiet", "--set", `trainer.default_local_dir=${sftDir}`],
    { timeoutMs: 900_000 },
  );
  expect(sft.code, sft.stderr).toBe(0);
  const grpo = async (name: string, extra: string[] = []) => {
    const runDir = path.join(scratch, name);
    const rl = await runCli(
      [
        "train", "--config", path.join(REPO_ROOT, "examples", "cpu-demo.yaml"), "--quiet",
        "--set", `actor_rollout_ref.model.path=${path.join(sftDir, "model")}`,
        "--set", `trainer.default_local_dir=${runDir}`,
        "--set", `trainer.total_training_steps=${STEPS}`,
        "--set", `trainer.test_freq=${STEPS}`,
        ...extra,
      ],
      { timeoutMs: 600_000 },
    );
    expect(rl.code, rl.stderr).toBe(0);
    return runDir;
  };
  const rlDir = await grpo("rl");
  const validations = readMetrics(rlDir).filter((m) => m[ACC] !== undefined);
  expect(validations.map((m) => m.step)).toEqual([0, STEPS]);
  const [before, after] = validations as [Record<string, number>, Record<string, number>];
  // Correctness-only reward: accuracy and reward are the same number.
  expect(before[ACC]).toBe(before[REWARD]);
  // The warm start is short of the task: greedy 0.00-0.05 over seeds 0-5 (the issue allows up to 0.5).
  expect(before[ACC]).toBeLessThanOrEqual(0.5);
  // Greedy accuracy after 20 steps: 0.79-1.00 over seeds 0-6 and 15-22 on an AMD EPYC machine, with kl_loss_coef
  // 0.001 and 0.01 alike (0.93-1.00 in one_step_off on another); at step 10 it was 0.43-0.79, hence 20 steps and the
  // margin.
  expect(after[ACC]).toBeGreaterThanOrEqual(before[ACC]! + 0.5);
  // The sampled (temperature 1) train accuracy rises too, 128 trajectories a step: means of 0.36-0.45 over steps 1-10
  // and 0.59-0.68 over steps 11-20 over seeds 0-6 (0.36-0.41 and 0.61-0.65 over seeds 15-22).
  const train = readMetrics(rlDir).filter((m) => m[TRAIN_ACC] !== undefined).map((m) => m[TRAIN_ACC]!);
  expect(train).toHaveLength(STEPS);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  expect(mean(train.slice(-5))).toBeGreaterThanOrEqual(mean(train.slice(0, 5)) + 0.15);

  // Fully async training, everything else equal (partial rollouts on, samples up to one version stale, the demo's
  // truncated importance weights), learns too: its sampled accuracy climbs by sync's margin, and its greedy accuracy
  // rises. Not to sync's bar, and the climb is its best three consecutive steps, not its last five: on this demo
  // fully_async does not always keep what it learned (docs/cpu-demo.md, "Seeds that blow up"; the same mechanism as
  // one_step_off's). On an AMD EPYC machine its greedy accuracy at step 20 was 0.33 in one CI run and 0.71-0.99 in
  // seven others; its last five steps rose 0.27-0.30 over its first five in four quiet runs, 0.14 in one CI run, and
  // 0.09 in a run beside two busy loops, which blew up after step 13 (KL to the reference 1.29) having climbed from
  // 0.31 to 0.51 over its best three steps. A run that does not learn at all stays near its start (0.30).
  // Its validation before training would repeat the first run's: the same greedy pass of the same warm start, which
  // `before` already holds.
  const asyncDir = await grpo("fully_async", [
    "--set", "async_training.mode=fully_async", "--set", "async_training.staleness_threshold=1", "--set", "async_training.partial_rollout=true",
    "--set", "trainer.val_before_train=false",
  ]);
  const asyncValidations = readMetrics(asyncDir).filter((m) => m[ACC] !== undefined);
  expect(asyncValidations.map((m) => m.step)).toEqual([STEPS]);
  expect(asyncValidations[0]![ACC]).toBeGreaterThan(before[ACC]!);
  const asyncTrain = readMetrics(asyncDir).filter((m) => m[TRAIN_ACC] !== undefined).map((m) => m[TRAIN_ACC]!);
  expect(asyncTrain).toHaveLength(STEPS);
  const bestThree = Math.max(...asyncTrain.slice(2).map((_, i) => mean(asyncTrain.slice(i, i + 3))));
  expect(bestThree).toBeGreaterThanOrEqual(mean(asyncTrain.slice(0, 5)) + 0.15);
}, 1_500_000);
