/**
 * The CPU demo's two stages, shortened (issue 14, part 2), run as `npm run demo` runs them: `agentrl sft` on the
 * committed demonstrations, then `agentrl train` from its model with the correctness-only reward. Greedy validation
 * accuracy on the 100 test vaults must start well short of the task (the warm start copies codes to unseen vaults only
 * part of the time) and rise under GRPO, 40 of the demo's 80 steps. The SFT stage is deterministic; the GRPO stage is
 * seeded but not bit-identical from run to run (the order rollouts finish in), so the margins come from several runs
 * (docs/cpu-demo.md).
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { readMetrics } from "./helpers/train.js";

const scratch = mkdtempSync(path.join(os.tmpdir(), "agentrl-demo-learns-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const ACC = "val-core/agentrl/vault/acc/mean@1";
const TRAIN_ACC = "acc/mean";
/** Half the demo's 80 steps: far enough for the rise to stand clear of the run-to-run noise (docs/cpu-demo.md). */
const STEPS = 40;
const REWARD = "val-core/agentrl/vault/reward/mean@1";

it("SFT warm start, then GRPO raises greedy accuracy", async () => {
  const sftDir = path.join(scratch, "sft");
  const sft = await runCli(
    ["sft", "--config", path.join(REPO_ROOT, "examples", "cpu-demo-sft.yaml"), "--quiet", "--set", `trainer.default_local_dir=${sftDir}`],
    { timeoutMs: 300_000 },
  );
  expect(sft.code, sft.stderr).toBe(0);
  const rlDir = path.join(scratch, "rl");
  const rl = await runCli(
    [
      "train", "--config", path.join(REPO_ROOT, "examples", "cpu-demo.yaml"), "--quiet",
      "--set", `actor_rollout_ref.model.path=${path.join(sftDir, "model")}`,
      "--set", `trainer.default_local_dir=${rlDir}`,
      "--set", `trainer.total_training_steps=${STEPS}`,
      "--set", `trainer.test_freq=${STEPS}`,
    ],
    { timeoutMs: 900_000 },
  );
  expect(rl.code, rl.stderr).toBe(0);
  const validations = readMetrics(rlDir).filter((m) => m[ACC] !== undefined);
  expect(validations.map((m) => m.step)).toEqual([0, STEPS]);
  const [before, after] = validations as [Record<string, number>, Record<string, number>];
  // Correctness-only reward: accuracy and reward are the same number.
  expect(before[ACC]).toBe(before[REWARD]);
  // The warm start is short of the task: the SFT stage is deterministic, seed 0 gives 0.51 on every machine so far.
  expect(before[ACC]).toBeLessThanOrEqual(0.55);
  // Greedy accuracy after 40 steps: 0.70, 0.71, 0.71 and 0.71 in four runs here (lr 3e-4 to 1e-3); the runs are not
  // bit-identical (the order rollouts finish in changes the mini-batches), hence the margin.
  expect(after[ACC]).toBeGreaterThanOrEqual(before[ACC]! + 0.1);
  // The sampled (temperature 1) train accuracy rises too, 128 trajectories a step: steps 1-5 averaged 0.32 and steps
  // 36-40 0.49-0.51 in two runs at this lr.
  const train = readMetrics(rlDir).filter((m) => m[TRAIN_ACC] !== undefined).map((m) => m[TRAIN_ACC]!);
  expect(train).toHaveLength(STEPS);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  expect(mean(train.slice(-5))).toBeGreaterThanOrEqual(mean(train.slice(0, 5)) + 0.08);
}, 1_200_000);
