/**
 * Configs as users write them: `--dry-run` shows the effective config and what it implies; a misspelled key is an
 * error that names the nearest valid key (never a silent no-op); wrong types name their path; --set overrides.
 * The first two cases run the built CLI as a user does (its exit status included); the rest check the same
 * commands' config logic in this process (helpers/in-process-cli.ts): the same text and exit codes without a Node
 * start-up per call.
 */
import { describe, expect, it } from "vitest";
import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { runCliInProcess } from "./helpers/in-process-cli.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { tempDir } from "./helpers/tmp.js";
import { load as loadYaml } from "js-yaml";
import { requestPriority } from "../src/train/rollout.js";
import { trainConfigSchema } from "../src/train/config.js";
import { grpoWorkerConfig } from "../src/train/worker-config.js";
import { trainExportInit } from "../src/export/command.js";

const dir = tempDir("config");
function config(name: string, text: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

const base = `data:
  train_files: /nonexistent/train.parquet
  train_batch_size: 16
  max_prompt_length: 256
  max_response_length: 512
actor_rollout_ref:
  model: {path: /nonexistent/model}
  actor: {ppo_mini_batch_size: 4, ppo_epochs: 2}
  rollout: {n: 8, max_concurrency: 64}
trainer: {n_gpus_per_node: 4, nnodes: 2}
`;

describe("agentrl train --dry-run", () => {
  it("prints the effective config and what it implies", async () => {
    const result = await runCli(["train", "--config", config("ok.yaml", base), "--dry-run", "--json"]);
    expect(result.code, result.stderr).toBe(0);
    const { config: effective, implied } = JSON.parse(result.stdout);
    expect(effective.actor_rollout_ref.actor.clip_ratio_high).toBe(0.2);
    expect(implied).toMatchObject({
      prompts_per_step: 16,
      trajectories_per_step: 128,
      mini_batches_per_step: 8,
      token_budget_per_trajectory: 768,
      requests_in_flight: 64,
      training_gpus: 8,
    });
  });

  it("rejects a misspelled key, suggesting the nearest valid key, with exit code 2", async () => {
    const file = config("typo.yaml", base.replace("ppo_epochs: 2", "ppo_epoch: 2"));
    const result = await runCli(["train", "--config", file, "--dry-run"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`${file}: invalid config`);
    expect(result.stderr).toContain("actor_rollout_ref.actor.ppo_epoch: unknown key (did you mean actor_rollout_ref.actor.ppo_epochs?)");
  });

  it("async_training: shows the mode's staleness; an unknown mode, or an async mode colocated, is exit 2 naming the key", async () => {
    const file = config("async.yaml", base);
    const ok = await runCliInProcess(["train", "--config", file, "--dry-run", "--json", "--set", "async_training.mode=fully_async", "--set", "async_training.staleness_threshold=1.5"]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout).implied.generation).toBe(
      "fully_async: generation runs up to 24 groups beyond the 16 of the step being trained; staleness ≤ 2, staler groups dropped; " +
        "a sync pauses generation and continues it on the new weights (partial rollouts)",
    );
    const bad = await runCliInProcess(["train", "--config", file, "--dry-run", "--set", "async_training.mode=async"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('async_training.mode: Invalid option: expected one of "sync"|"one_step_off"|"fully_async"');
    const colocated = await runCliInProcess(["train", "--config", file, "--dry-run", "--colocate", "--set", "async_training.mode=one_step_off"]);
    expect(colocated.code).toBe(2);
    expect(colocated.stderr).toContain("async_training.mode: one_step_off needs the engine on GPUs of its own; trainer.colocate is true");
    const syncEvery = ["--set", "async_training.trigger_parameter_sync_step=4"];
    const notAsync = await runCliInProcess(["train", "--config", file, "--dry-run", ...syncEvery, "--set", "async_training.mode=one_step_off"]);
    expect(notAsync.code).toBe(2);
    expect(notAsync.stderr).toContain("async_training.trigger_parameter_sync_step: 4 needs async_training.mode fully_async; the mode is one_step_off");
    const priority = ["--set", "async_training.engine_priority=true"];
    const priorityNotAsync = await runCliInProcess(["train", "--config", file, "--dry-run", ...priority]);
    expect(priorityNotAsync.code).toBe(2);
    expect(priorityNotAsync.stderr).toContain("async_training.engine_priority: true needs async_training.mode fully_async; the mode is sync");
    const local = await runCliInProcess(["train", "--config", file, "--dry-run", "--json", ...syncEvery, ...priority, "--set", "async_training.mode=fully_async"]);
    expect(local.code, local.stderr).toBe(0);
    expect(JSON.parse(local.stdout).implied.generation).toBe(
      "fully_async: each step updates on 16 groups, the weights go to the engine every 4 steps (trigger_parameter_sync_step); " +
        "generation runs up to 128 groups beyond the last sync; staleness ≤ 1 syncs (≤ 7 updates), staler groups dropped; " +
        "a sync pauses generation and continues it on the new weights (partial rollouts); " +
        "requests carry priority −step (oldest groups first on a server with priority scheduling)",
    );
    // The priority each training rollout sends: older steps' groups rank higher; validation and the default send none.
    const asyncConfig = (engine_priority: boolean) => ({ async_training: { mode: "fully_async", staleness_threshold: 1, trigger_parameter_sync_step: 1, engine_priority, partial_rollout: true } as const });
    expect(requestPriority(asyncConfig(true), "train", 7)).toEqual({ priority: -7 });
    expect(requestPriority(asyncConfig(true), "val", 7)).toEqual({});
    expect(requestPriority(asyncConfig(false), "train", 7)).toEqual({});
  });

  it("the KL reference: the starting model, another model (ref.model.path), or refused when no KL loss reads it", async () => {
    const file = config("ref.yaml", base);
    const implied = async (...sets: string[]) => {
      const result = await runCliInProcess(["train", "--config", file, "--dry-run", "--json", ...sets.flatMap((s) => ["--set", s])]);
      expect(result.code, result.stderr).toBe(0);
      return JSON.parse(result.stdout).implied.kl_reference as string;
    };
    expect(await implied()).toBe("none (actor.use_kl_loss false)");
    expect(await implied("actor_rollout_ref.actor.use_kl_loss=true")).toBe("a frozen copy of the starting model, /nonexistent/model");
    expect(await implied("actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.model.lora_rank=8")).toMatch(/^the policy with its LoRA adapter disabled/);
    expect(await implied("actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.ref.model.path=/models/base")).toBe(
      "a frozen copy of /models/base (actor_rollout_ref.ref.model.path)",
    );
    // The worker is told, and only when a KL loss reads the reference.
    const parsed = (kl: boolean) =>
      trainConfigSchema.parse({ ...loadYaml(base) as object, actor_rollout_ref: { model: { path: "/m" }, actor: { use_kl_loss: kl }, ref: { model: { path: "/models/base" } } } });
    expect(grpoWorkerConfig(parsed(true), 16)).toMatchObject({ use_ref: true, ref_model_path: "/models/base" });
    expect(grpoWorkerConfig(parsed(false), 16)).not.toHaveProperty("ref_model_path");
    // The policy loss reaches the worker: vanilla by default, GSPO when asked (verl's actor.policy_loss.loss_mode).
    expect(grpoWorkerConfig(parsed(false), 16)).toMatchObject({ loss_mode: "vanilla" });
    const gspo = trainConfigSchema.parse({ ...loadYaml(base) as object, actor_rollout_ref: { model: { path: "/m" }, actor: { policy_loss: { loss_mode: "gspo" } } } });
    expect(grpoWorkerConfig(gspo, 16)).toMatchObject({ loss_mode: "gspo" });
    // agentrl export loads no reference: a run with its own reference model exports without it (the worker refuses
    // ref_model_path without use_ref).
    const exported = trainExportInit(parsed(true));
    expect(exported).toMatchObject({ use_ref: false, use_kl_loss: false });
    expect(exported).not.toHaveProperty("ref_model_path");
    const refused = await runCliInProcess(["train", "--config", file, "--dry-run", "--set", "actor_rollout_ref.ref.model.path=/models/base"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("actor_rollout_ref.ref.model.path is set but actor.use_kl_loss is false");
  });

  it("rejects a misspelled key given with --set", async () => {
    const result = await runCliInProcess(["train", "--config", config("ok2.yaml", base), "--dry-run", "--set", "trainer.save_freqq=5"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("trainer.save_freqq: unknown key (did you mean trainer.save_freq?)");
  });

  it("names the path of a wrong type", async () => {
    const result = await runCliInProcess(["train", "--config", config("ok3.yaml", base), "--dry-run", "--set", "actor_rollout_ref.rollout.n=many"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/actor_rollout_ref\.rollout\.n: .*expected number/);
  });

  it("keeps a verl config's wandb logger, and drops the trackers agentrl has no logger for with a note (docs/from-verl.md)", async () => {
    const result = await runCliInProcess(["train", "--config", config("wandb.yaml", base), "--dry-run", "--json", "--set", 'trainer.logger=["console","wandb","mlflow"]']);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout).config.trainer.logger).toEqual(["console", "wandb"]);
    expect(result.stderr).toContain("note: trainer.logger=[console,wandb,mlflow] read as [console,wandb]: mlflow not built into agentrl");
  });

  it("--set overrides the file, and flags override both", async () => {
    const result = await runCliInProcess([
      "train", "--config", config("ok4.yaml", base), "--dry-run", "--json",
      "--set", "actor_rollout_ref.rollout.n=2", "--set", "trainer.total_training_steps=7", "--steps", "3",
    ]);
    expect(result.code, result.stderr).toBe(0);
    const { config: effective } = JSON.parse(result.stdout);
    expect(effective.actor_rollout_ref.rollout.n).toBe(2);
    expect(effective.trainer.total_training_steps).toBe(3);
  });

  it("shows the learning-rate schedule; verl's older warmup_style is accepted and wins; a wrong type names its path", async () => {
    const result = await runCliInProcess([
      "train", "--config", config("lr.yaml", base), "--dry-run", "--json",
      "--set", "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.1", "--set", "actor_rollout_ref.actor.optim.warmup_style=cosine",
      "--set", "actor_rollout_ref.actor.optim.min_lr_ratio=0.1",
    ]);
    expect(result.code, result.stderr).toBe(0);
    // train_files does not exist here, so the run's optimizer steps are unknown: 4 mini-batches × 2 epochs per step.
    expect(JSON.parse(result.stdout).implied.lr_schedule).toBe(
      "lr 0.000001, linear warm-up from 0 over 0.1 × the run's optimizer steps, then cosine down to 0.1 × lr at optimizer step ? (8 optimizer steps per training step)",
    );
    const wrong = await runCliInProcess(["train", "--config", config("lr2.yaml", base), "--dry-run", "--set", "actor_rollout_ref.actor.optim.lr_scheduler_type=linear"]);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(/actor_rollout_ref\.actor\.optim\.lr_scheduler_type: .*"constant"\|"cosine"/);
  });

  it("a YAML syntax error names the file", async () => {
    const file = config("broken.yaml", "data: [unclosed\n");
    const result = await runCliInProcess(["train", "--config", file, "--dry-run"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(`${file}: not valid YAML`);
  });
});

describe("agentrl rollout --dry-run", () => {
  it("shows requests in flight and token budgets without contacting a server", async () => {
    const result = await runCliInProcess([
      "rollout", "--dry-run", "--json", "--n", "4", "--concurrency", "16", "--server", "http://127.0.0.1:9",
      "--set", "data.max_prompt_length=100", "--set", "data.max_response_length=50",
    ]);
    expect(result.code, result.stderr).toBe(0);
    const { implied } = JSON.parse(result.stdout);
    expect(implied).toMatchObject({ requestsInFlight: 16, tokenBudgetPerTrajectory: 150 });
  });

  it("--reward-name picks the reward module's function; a missing one names the file and what it exports, exit 2", async () => {
    const module = path.join(REPO_ROOT, "test", "fixtures", "rewards", "named-rewards.mjs");
    const dry = await runCliInProcess(["rollout", "--dry-run", "--json", "--reward", module, "--reward-name", "strict_reward"]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(JSON.parse(dry.stdout).config.custom_reward_function).toEqual({ path: module, name: "strict_reward", reward_kwargs: {} });
    const out = path.join(dir, "never-written.parquet");
    const result = await runCliInProcess([
      "rollout", "--data", path.join(REPO_ROOT, "examples", "cpu-demo", "data", "test.parquet"), "--model", QWEN3_DIR,
      "--server", "http://127.0.0.1:9", "--reward", module, "--reward-name", "my_reward", "--out", out,
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      `reward module ${module}: no exported function my_reward (custom_reward_function.name); it exports: computeScore, compute_score, kwargs_reward, strict_reward`,
    );
    expect(existsSync(out)).toBe(false);
  });

  it("rejects an unknown multi_turn key with a suggestion", async () => {
    const result = await runCliInProcess(["rollout", "--dry-run", "--set", "actor_rollout_ref.rollout.multi_turn.max_tool_response_len=10"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("did you mean actor_rollout_ref.rollout.multi_turn.max_tool_response_length?");
  });
});
