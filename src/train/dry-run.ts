/** `agentrl train --dry-run`: the effective config and what it implies, before anything is read or started. */
import { overSampleTarget } from "../rollout/over-sample.js";
import { readParquetInfo } from "../data/parquet.js";
import { asList, optimizerStepsPerStep, totalOptimizerSteps, totalSteps, type TrainConfig } from "./config.js";
import { printDryRun } from "./console.js";
import { runDirOf } from "./run-dir.js";
import { maxStaleness } from "./schedule/index.js";

export async function printTrainDryRun(config: TrainConfig, json: boolean): Promise<void> {
  const rollout = config.actor_rollout_ref.rollout;
  const actor = config.actor_rollout_ref.actor;
  const trainRows = await countRows(asList(config.data.train_files));
  const perStep = config.data.train_batch_size * rollout.n;
  const miniBatch = actor.ppo_mini_batch_size ?? config.data.train_batch_size;
  const implied = {
    prompts_per_step: config.data.train_batch_size,
    trajectories_per_step: perStep,
    mini_batches_per_step: Math.ceil(config.data.train_batch_size / miniBatch) * actor.ppo_epochs,
    optimizer_steps_per_step: Math.ceil(config.data.train_batch_size / miniBatch) * actor.ppo_epochs,
    token_budget_per_trajectory: config.data.max_prompt_length + config.data.max_response_length,
    requests_in_flight: Math.min(rollout.max_concurrency, perStep),
    over_sampling:
      rollout.over_sample_rate > 0
        ? `each step's rollout stops once ${overSampleTarget(perStep, rollout.over_sample_rate)} of ${perStep} have finished`
        : "off",
    generation: generationText(config),
    lora: loraText(config),
    kl_reference: referenceText(config),
    total_steps: trainRows === null ? null : totalSteps(config, trainRows),
    lr_schedule: lrScheduleText(config, trainRows === null ? null : totalOptimizerSteps(config, trainRows)),
    training_gpus: config.trainer.nnodes * config.trainer.n_gpus_per_node,
    inference:
      rollout.name === "embedded"
        ? "agentrl's embedded engine (started by train)"
        : `${rollout.server.urls.length} SGLang server URL(s)${config.trainer.colocate ? ", colocated with training" : ""}`,
    run_folder: runDirOf(config).root,
  };
  printDryRun(config, implied, json, "unknown (train_files not readable)");
}

/** LoRA in words: what trains, the reference, and what each sync sends. */
function loraText(config: TrainConfig): string {
  const model = config.actor_rollout_ref.model;
  if (model.lora_rank === 0) return "off: every weight trains";
  const modules = model.target_modules === "all-linear" ? "every linear layer but the lm_head" : model.target_modules.join(", ");
  const sync = model.lora.merge
    ? `the merged weights through update_weights.method ${config.actor_rollout_ref.rollout.update_weights.method}`
    : "the adapter alone (/load_lora_adapter under the step, lora_path on every request; servers need --enable-lora)";
  return `rank ${model.lora_rank}, alpha ${model.lora_alpha} on ${modules}; the base is frozen; each sync sends ${sync}`;
}

/** What the KL loss compares against, and what it costs in memory. */
function referenceText(config: TrainConfig): string {
  const { actor, model, ref } = config.actor_rollout_ref;
  if (!actor.use_kl_loss) return "none (actor.use_kl_loss false)";
  if (ref.model.path !== null) return `a frozen copy of ${ref.model.path} (actor_rollout_ref.ref.model.path)`;
  if (model.lora_rank > 0) return "the policy with its LoRA adapter disabled: the frozen base, no second copy";
  return `a frozen copy of the starting model, ${model.path}`;
}

/** Rows of the training files, or null when one cannot be read (a dry run reads no data). */
async function countRows(files: string[]): Promise<number | null> {
  let total = 0;
  for (const file of files) {
    try {
      total += (await readParquetInfo(file)).numRows;
    } catch {
      return null;
    }
  }
  return total;
}

/** The learning-rate schedule in words (the worker's lr_schedule.py computes it). */
function lrScheduleText(config: TrainConfig, totalOptimizer: number | null): string {
  const optim = config.actor_rollout_ref.actor.optim;
  const warmup =
    optim.lr_warmup_steps >= 0 ? String(optim.lr_warmup_steps)
    : totalOptimizer === null ? `${optim.lr_warmup_steps_ratio} × the run's`
    : String(Math.floor(optim.lr_warmup_steps_ratio * totalOptimizer));
  const after =
    (optim.warmup_style ?? optim.lr_scheduler_type) === "cosine"
      ? `cosine down to ${optim.min_lr_ratio} × lr at optimizer step ${totalOptimizer ?? "?"}`
      : "constant";
  const perStep = optimizerStepsPerStep(config);
  const steps = `${perStep} optimizer step${perStep === 1 ? "" : "s"} per training step`;
  return warmup === "0" ? `lr ${optim.lr}, ${after} (${steps})` : `lr ${optim.lr}, linear warm-up from 0 over ${warmup} optimizer steps, then ${after} (${steps})`;
}

/** async_training in words: when generation runs, and how stale a trained trajectory can be. */
function generationText(config: TrainConfig): string {
  const { mode, staleness_threshold: threshold, partial_rollout: partial } = config.async_training;
  const bound = maxStaleness(mode, threshold);
  if (mode === "sync") return "sync: each step generates, then trains; staleness 0";
  const sync = partial
    ? "a sync pauses generation and continues it on the new weights (partial rollouts)"
    : "a sync waits for the generations in flight (partial_rollout false)";
  if (mode === "one_step_off") {
    const wait = partial ? sync : "step k's sync waits for step k+1's whole batch, so one version samples each batch (partial_rollout false)";
    return `one_step_off: step k+1 generates while step k trains; staleness 1 (0 at the first step); ${wait}`;
  }
  const groups = config.data.train_batch_size;
  const every = config.async_training.trigger_parameter_sync_step;
  const priority = config.async_training.engine_priority ? "; requests carry priority −step (oldest groups first on a server with priority scheduling)" : "";
  if (every === 1) {
    const ahead = Math.floor(threshold * groups + 1e-9);
    return `fully_async: generation runs up to ${ahead} groups beyond the ${groups} of the step being trained; staleness ≤ ${bound}, staler groups dropped; ${sync}${priority}`;
  }
  const ahead = Math.floor(every * (1 + threshold) * groups + 1e-9);
  return (
    `fully_async: each step updates on ${groups} groups, the weights go to the engine every ${every} steps (trigger_parameter_sync_step); ` +
    `generation runs up to ${ahead} groups beyond the last sync; staleness ≤ ${bound} syncs (≤ ${every * (bound + 1) - 1} updates), staler groups dropped; ${sync}${priority}`
  );
}
