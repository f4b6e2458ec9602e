/**
 * `trainer.val_only` (verl's key) end to end on the CPU demo, kept short: the built CLI validates model.path without
 * training (no total_training_steps, no worker), then a 1-step run makes a checkpoint and `--resume` with val_only
 * validates that checkpoint at its step. The 1-step run, which costs the most, checks two more things on the way: its
 * console line shows the KL loss and the grad norm, and the learning-rate schedule's keys reach the worker (two
 * optimizer steps, warm-up ratio 0.5 of them: the first runs at lr 0, the second at the full lr, after which the cosine
 * would start; actor/lr is their mean). The validation of the checkpoint also runs a verl user's Python reward and
 * Python agent loop (--set on the command line: they apply to the validation, the run's config.yaml stays as it was).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { runCli } from "./helpers/cli.js";
import { DEMO_CONFIG, pad6, readMetrics } from "./helpers/train.js";
import { readTrajectories } from "../src/data/trajectory-store.js";
import { tempDir } from "./helpers/tmp.js";

const scratch = tempDir("train-val-only");
const RUN_TIMEOUT_MS = 240_000;

/** The demo, small: 4 validation prompts, 2 prompts × n=2 per training step. */
function demoArgs(runDir: string): string[] {
  return [
    "train", "--config", DEMO_CONFIG,
    "--set", `trainer.default_local_dir=${runDir}`,
    "--set", "data.val_max_samples=4",
    "--set", "data.train_batch_size=2",
    "--set", "actor_rollout_ref.rollout.n=2",
    "--set", "trainer.test_freq=-1",
  ];
}

const VAL_REWARD = "val-core/agentrl/vault/reward/mean@1";
const VAL_ACC = "val-core/agentrl/vault/acc/mean@1";

describe("agentrl train with trainer.val_only", () => {
  it("with DAPO's overlong buffer (verl's reward_model.overlong_buffer keys) every reward carries its length penalty, logged in reward_extra", async () => {
    const runDir = path.join(scratch, "overlong");
    // The buffer is the whole budget (64 tokens): a response of L tokens loses L / 64 * 0.5.
    const result = await runCli(
      [
        ...demoArgs(runDir), "--set", "trainer.val_only=true", "--set", "trainer.total_training_steps=null",
        "--set", "reward_model.overlong_buffer.enable=True", "--set", "reward_model.overlong_buffer.len=64",
        "--set", "reward_model.overlong_buffer.penalty_factor=0.5", "--set", "reward_model.overlong_buffer.log=True",
      ],
      { timeoutMs: RUN_TIMEOUT_MS },
    );
    expect(result.code, result.stderr).toBe(0);
    const validated = [];
    for await (const t of readTrajectories(path.join(runDir, "rollouts", `val-${pad6(0)}.parquet`))) validated.push(t);
    expect(validated).toHaveLength(4);
    for (const t of validated) {
      const extra = t.reward_extra as { acc: number; overlong_reward: number; overlong: boolean };
      expect(t.response_ids.length).toBeGreaterThan(0);
      expect(extra.overlong_reward).toBeCloseTo((-t.response_ids.length / 64) * 0.5, 10);
      expect(extra.overlong).toBe(true);
      expect(t.reward).toBeCloseTo(extra.acc + extra.overlong_reward, 10);
    }
  });


  it("validates model.path without training: one metrics line at step 0, printed as JSON, exit 0", async () => {
    const runDir = path.join(scratch, "fresh");
    const result = await runCli(
      [...demoArgs(runDir), "--json", "--set", "trainer.val_only=true", "--set", "trainer.total_training_steps=null"],
      { timeoutMs: RUN_TIMEOUT_MS },
    );
    expect(result.code, result.stderr).toBe(0);
    const events = result.stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(events.filter((e) => e.event === "step")).toEqual([]);
    const validation = events.filter((e) => e.event === "validation");
    expect(validation).toHaveLength(1);
    expect(validation[0]).toMatchObject({ step: 0, [VAL_REWARD]: expect.any(Number), [VAL_ACC]: expect.any(Number) });
    const metrics = readMetrics(runDir);
    expect(metrics.map((m) => m.step)).toEqual([0]);
    expect(metrics[0]![VAL_REWARD]).toBe(validation[0]![VAL_REWARD]);
    // The default vault reward is correctness only, so validation accuracy equals validation reward.
    expect(metrics[0]![VAL_ACC]).toBe(metrics[0]![VAL_REWARD]);
    expect(metrics[0]!["timing_s/testing"]).toBeGreaterThan(0);
    const validated = [];
    for await (const t of readTrajectories(path.join(runDir, "rollouts", `val-${pad6(0)}.parquet`))) validated.push(t);
    expect(validated).toHaveLength(4);
    // No training: no checkpoint, and the worker was never started.
    expect(existsSync(path.join(runDir, "state.json"))).toBe(false);
    expect(existsSync(path.join(runDir, "logs", "worker.log"))).toBe(false);
  }, RUN_TIMEOUT_MS);

  it("needs data.val_files, naming the config file (exit 2, before anything starts)", async () => {
    const runDir = path.join(scratch, "no-val");
    const result = await runCli([...demoArgs(runDir), "--set", "trainer.val_only=true", "--set", "data.val_files=null"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`${DEMO_CONFIG}: trainer.val_only needs data.val_files`);
    expect(existsSync(runDir)).toBe(false);
  });
});

describe("agentrl train with trainer.val_only after a 1-step run (--resume)", () => {
  const runDir = path.join(scratch, "trained");
  let trained: Awaited<ReturnType<typeof runCli>>;
  let config: string;
  let result: Awaited<ReturnType<typeof runCli>>;

  beforeAll(async () => {
    trained = await runCli(
      [
        ...demoArgs(runDir), "--quiet", "--set", "trainer.total_training_steps=1",
        "--set", "actor_rollout_ref.actor.ppo_mini_batch_size=1",
        "--set", "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.5",
        "--set", "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine",
        "--set", "actor_rollout_ref.actor.optim.min_lr_ratio=0.1",
      ],
      { timeoutMs: RUN_TIMEOUT_MS },
    );
    expect(trained.code, trained.stderr).toBe(0);
    config = readFileSync(path.join(runDir, "config.yaml"), "utf8");

    // The validation of the checkpoint, with a verl user's Python reward and Python agent loop.
    const loop = path.join(scratch, "loop.py");
    writeFileSync(loop, "async def agent_loop(agent):\n    return await agent.run_tool_loop()\n");
    const reward = path.join(scratch, "reward.py");
    writeFileSync(reward, [
      "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):",
      "    return {'score': 0.5, 'acc': False, 'tools': sorted(extra_info['rollout_reward_scores'])}",
      "",
    ].join("\n"));
    result = await runCli(
      [
        ...demoArgs(runDir), "--resume", "--set", "trainer.val_only=true",
        "--set", `custom_reward_function.path=${reward}`,
        // Every row runs tool_agent (by agent_name or as the default): the user's loop takes the built-in's place.
        "--set", `actor_rollout_ref.rollout.agent.agent_loops.tool_agent=${loop}`,
      ],
      { timeoutMs: RUN_TIMEOUT_MS },
    );
  }, 3 * RUN_TIMEOUT_MS);

  it("the step line shows kl and grad_norm; the lr schedule and the step's timings reach the metrics", () => {
    const [stepMetrics] = readMetrics(runDir);
    expect(stepMetrics!["actor/optimizer_steps"]).toBe(2);
    expect(stepMetrics!["actor/lr"]).toBeCloseTo((0 + 5e-3) / 2, 9); // the demo's lr is 5e-3
    const stepLine = trained.stdout.split("\n").find((l) => l.startsWith("step "));
    expect(stepLine).toMatch(/\| reward -?\d+\.\d{3} \| acc \d\.\d{3} \| kl -?\d+\.\d{2,3}(e[-+]\d+)? \| grad_norm \d+\.\d{3} \|/);
    // The step budget reaches the metrics line, the worker's parts included, and the step line shows the split.
    for (const part of [
      "gen", "gen_engine_busy", "gen_client", "batch_write", "batch_read", "old_log_prob", "old_log_prob_actor", "ref", "log_prob_save",
      "update_actor", "forward_backward", "optimizer", "update_weights", "record", "step",
    ]) {
      expect(stepMetrics![`timing_s/${part}`], part).toBeGreaterThanOrEqual(0);
    }
    expect(stepMetrics!["timing_s/gen_engine_busy"]).toBeGreaterThan(0);
    expect(stepMetrics!["timing_s/testing"]).toBeUndefined(); // test_freq -1: no validation
    expect(stepLine).toMatch(/\(gen \d+\.\ds \[engine \d+\.\ds\], log-prob \d+\.\ds, update \d+\.\ds, sync \d+\.\ds\)/);
  });

  it("with --resume validates the last checkpoint at its step and keeps the run's config", async () => {
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/validation @ step 1: .*val-core\/agentrl\/vault\/reward\/mean@1/);
    expect(result.stdout).toContain("done: validated step 1 (trainer.val_only)");
    const metrics = readMetrics(runDir);
    expect(metrics.map((m) => m.step)).toEqual([1, 1]); // the training step's line, then the validation's
    expect(metrics[0]!["actor/pg_loss"]).toEqual(expect.any(Number));
    // Validation's own timer (timing_s/testing) and nothing of a training step's.
    expect(Object.keys(metrics[1]!).filter((k) => !k.startsWith("val-core/")).sort()).toEqual(["step", "time", "timing_s/testing"]);
    expect(metrics[1]!["timing_s/testing"]).toBeGreaterThan(0);
    // The checkpoint's weights were pushed to the engine before validating: the trajectories say so.
    const validated = [];
    for await (const t of readTrajectories(path.join(runDir, "rollouts", `val-${pad6(1)}.parquet`))) validated.push(t);
    expect(validated.map((t) => t.weight_version)).toEqual(["1", "1", "1", "1"]);
    expect(readFileSync(path.join(runDir, "config.yaml"), "utf8")).toBe(config);
  });

  it("runs a verl user's Python reward and Python agent loop: the loop drives every trajectory, the reward scores them", async () => {
    expect(result.code, result.stderr).toBe(0);
    expect(readMetrics(runDir)[1]![VAL_REWARD]).toBe(0.5);
    const validated = [];
    for await (const t of readTrajectories(path.join(runDir, "rollouts", `val-${pad6(1)}.parquet`))) validated.push(t);
    // open_vault's instance, created from each row's tools_kwargs, gave its calc_reward to the reward function.
    expect(validated.map((t) => [t.agent_loop, t.reward_extra!["tools"]])).toEqual(validated.map(() => ["tool_agent", ["open_vault"]]));
  });
});
