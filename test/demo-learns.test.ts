/**
 * The CPU demo's two stages, shortened (issue 14, part 2), run as `npm run demo` runs them: `agentrl sft` on the
 * committed demonstrations, then `agentrl train` from its model with the correctness-only reward. Greedy validation
 * accuracy on the 100 test vaults must start well short of the task (the warm start copies codes to unseen vaults only
 * part of the time) and rise under GRPO. Seeds are fixed and the CPU run is deterministic; the 40-step curves per seed are in docs/cpu-demo.md.
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
      "--set", "trainer.total_training_steps=10",
    ],
    { timeoutMs: 600_000 },
  );
  expect(rl.code, rl.stderr).toBe(0);
  const validations = (await readMetrics(rlDir)).filter((m) => m[ACC] !== undefined);
  expect(validations.map((m) => m.step)).toEqual([0, 10]);
  const [before, after] = validations as [Record<string, number>, Record<string, number>];
  // Correctness-only reward: accuracy and reward are the same number.
  expect(before[ACC]).toBe(before[REWARD]);
  // The warm start is well short of the task (seed 0 measured 0.51 here, 0.70 after 10 steps, docs/cpu-demo.md).
  expect(before[ACC]).toBeLessThan(0.65);
  expect(after[ACC]).toBeGreaterThanOrEqual(before[ACC]! + 0.1);
}, 900_000);
