/**
 * The shipped OpenAI-SDK agent (examples/openai-agent/: agent.py on the official `openai` package, as a Python
 * function agent) under `agentrl train` with its own config, as the README runs it, shortened: one step of 2 prompts
 * x 2 samples from the committed random-init demo model instead of the SFT warm start, no validation. That it learns
 * from the warm start is measured in docs/cpu-demo.md; this keeps the example running end to end: the config loads,
 * the agent's host starts, every trajectory goes through the gateway into the record, the step trains and logs.
 */
import path from "node:path";
import { expect, it } from "vitest";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { readMetrics, readStep } from "./helpers/train.js";
import { tempDir } from "./helpers/tmp.js";

const scratch = tempDir("openai-agent-example");

it("examples/openai-agent trains a step through the gateway: every trajectory recorded by vault_agent, metrics logged", async () => {
  const runDir = path.join(scratch, "run");
  const sets = {
    "actor_rollout_ref.model.path": path.join(REPO_ROOT, "examples/cpu-demo/model"),
    "trainer.default_local_dir": runDir,
    "trainer.total_training_steps": 1,
    "trainer.val_before_train": false,
    "trainer.test_freq": -1,
    "data.train_batch_size": 2,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 2,
    "actor_rollout_ref.rollout.n": 2,
  };
  const result = await runCli(
    ["train", "--config", path.join(REPO_ROOT, "examples/openai-agent/cpu-demo.yaml"), "--quiet", ...Object.entries(sets).flatMap(([key, value]) => ["--set", `${key}=${value}`])],
    { timeoutMs: 240_000 },
  );
  expect(result.code, result.stderr).toBe(0);
  const trajectories = await readStep(runDir, 1);
  expect(trajectories).toHaveLength(4);
  for (const t of trajectories) {
    expect(t.agent_loop).toBe("vault_agent");
    // A random model may stop or be cut at its length, never fail: the agent reports its reward either way.
    expect(["completed", "truncated"]).toContain(t.status);
    expect(t.drift).toBe("match");
    expect(t.assistant_turns).toBeGreaterThanOrEqual(1);
    expect(t.response_mask.some((m) => m === 1)).toBe(true);
    expect(t.reward_extra).toHaveProperty("answer");
  }
  const [step] = readMetrics(runDir);
  expect(step!.step).toBe(1);
  expect(step).toHaveProperty("timing_s/step");
  expect(step).toHaveProperty("critic/score/mean");
});
