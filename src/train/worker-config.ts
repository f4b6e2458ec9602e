/** The training worker's init config for GRPO, from verl's keys (docs/worker-protocol.md lists each field). */
import type { WorkerInitConfig } from "./worker/index.js";
import { totalOptimizerSteps, type TrainConfig } from "./config.js";
import { loraWorkerConfig } from "./lora-config.js";

export function grpoWorkerConfig(config: TrainConfig, trainSize: number): WorkerInitConfig {
  const actor = config.actor_rollout_ref.actor;
  return {
    model_path: config.actor_rollout_ref.model.path,
    dtype: actor.fsdp_config.dtype,
    seed: config.trainer.seed,
    lr: actor.optim.lr,
    betas: actor.optim.betas,
    weight_decay: actor.optim.weight_decay,
    lr_warmup_steps: actor.optim.lr_warmup_steps,
    lr_warmup_steps_ratio: actor.optim.lr_warmup_steps_ratio,
    lr_scheduler_type: actor.optim.warmup_style ?? actor.optim.lr_scheduler_type,
    min_lr_ratio: actor.optim.min_lr_ratio,
    num_cycles: actor.optim.num_cycles,
    total_optimizer_steps: totalOptimizerSteps(config, trainSize),
    grad_clip: actor.grad_clip,
    reshard_after_forward: actor.fsdp_config.reshard_after_forward,
    param_offload: actor.fsdp_config.param_offload,
    optimizer_offload: actor.fsdp_config.optimizer_offload,
    use_ref: actor.use_kl_loss,
    ref_offload: config.actor_rollout_ref.ref.fsdp_config.param_offload,
    ...(actor.use_kl_loss && config.actor_rollout_ref.ref.model.path !== null ? { ref_model_path: config.actor_rollout_ref.ref.model.path } : {}),
    gradient_checkpointing: config.actor_rollout_ref.model.enable_gradient_checkpointing,
    micro_batch_token_budget: actor.ppo_max_token_len_per_gpu,
    use_remove_padding: config.actor_rollout_ref.model.use_remove_padding,
    logprob_chunk_tokens: actor.logprob_chunk_tokens,
    temperature: config.actor_rollout_ref.rollout.temperature,
    ppo_mini_batch_size: actor.ppo_mini_batch_size,
    ppo_epochs: actor.ppo_epochs,
    shuffle: actor.shuffle,
    clip_ratio_low: actor.clip_ratio_low,
    clip_ratio_high: actor.clip_ratio_high,
    clip_ratio_c: actor.clip_ratio_c,
    loss_mode: actor.policy_loss.loss_mode,
    loss_agg_mode: actor.loss_agg_mode,
    loss_scale_factor: actor.loss_scale_factor,
    max_response_length: config.data.max_response_length,
    use_kl_loss: actor.use_kl_loss,
    kl_loss_coef: actor.kl_loss_coef,
    kl_loss_type: actor.kl_loss_type,
    entropy_coeff: actor.entropy_coeff,
    adv_estimator: config.algorithm.adv_estimator,
    norm_adv_by_std_in_grpo: config.algorithm.norm_adv_by_std_in_grpo,
    rollout_is_threshold: config.algorithm.rollout_is_threshold,
    rollout_is_mode: config.algorithm.rollout_is_mode,
    ...loraWorkerConfig(config.actor_rollout_ref.model),
  };
}
