/**
 * The worker protocol's messages (docs/worker-protocol.md): the `init` settings and zod schemas of every reply.
 * Mirrors worker/agentrl_worker/config.py and __main__.py.
 */
import { z } from "zod";

/** `init` settings, with verl's names; defaults live in the worker (config.py) and are listed in the protocol doc. */
export interface WorkerInitConfig {
  model_path: string;
  dtype?: "float32" | "bfloat16";
  seed?: number;
  lr?: number;
  betas?: [number, number];
  weight_decay?: number;
  /** Negative (the worker's default, -1): lr_warmup_steps_ratio × total_optimizer_steps. */
  lr_warmup_steps?: number;
  lr_warmup_steps_ratio?: number;
  lr_scheduler_type?: "constant" | "cosine";
  min_lr_ratio?: number;
  num_cycles?: number;
  /** The run's optimizer steps: needed by the cosine schedule and by lr_warmup_steps_ratio. */
  total_optimizer_steps?: number | null;
  grad_clip?: number;
  reshard_after_forward?: boolean;
  use_ref?: boolean;
  gradient_checkpointing?: boolean;
  micro_batch_token_budget?: number;
  temperature?: number;
  ppo_mini_batch_size?: number | null;
  ppo_epochs?: number;
  clip_ratio_low?: number;
  clip_ratio_high?: number;
  clip_ratio_c?: number;
  loss_agg_mode?: "token-mean" | "seq-mean-token-sum" | "seq-mean-token-mean" | "seq-mean-token-sum-norm";
  loss_scale_factor?: number | null;
  /** data.max_response_length: L of seq-mean-token-sum-norm when loss_scale_factor is null. */
  max_response_length?: number | null;
  use_kl_loss?: boolean;
  kl_loss_coef?: number;
  kl_loss_type?: "k1" | "kl" | "abs" | "k2" | "mse" | "k3" | "low_var_kl";
  entropy_coeff?: number;
  adv_estimator?: "grpo" | "rloo";
  norm_adv_by_std_in_grpo?: boolean;
  rollout_is_threshold?: number | null;
}

export const readyEvent = z.object({
  event: z.literal("ready"),
  protocol: z.literal(1),
  world_size: z.number().int().positive(),
  pid: z.number().int(),
});

export const workerErrorBody = z.object({
  type: z.string(),
  message: z.string(),
  traceback: z.string().optional(),
});

/** Every reply: `{id, ok: true, ...result}` or `{id, ok: false, error}`. */
export const replyEnvelope = z.union([
  z.object({ id: z.number().int().nullable(), ok: z.literal(true) }).passthrough(),
  z.object({ id: z.number().int().nullable(), ok: z.literal(false), error: workerErrorBody }),
]);

const metrics = z.record(z.string(), z.number());

export const initResult = z.object({
  world_size: z.number().int().positive(),
  device: z.string(),
  fsdp: z.enum(["fsdp2", "fsdp1"]),
  load_s: z.number(),
});
export const computeLogProbsResult = z.object({ path: z.string(), metrics });
export const updateResult = z.object({
  metrics,
  step: z.number().int(),
  /** Advantage of each batch row, in row order. */
  advantages: z.array(z.number()).optional(),
});
export const sftStepResult = z.object({
  step: z.number().int(),
  metrics: z.object({
    "sft/loss": z.number(),
    "sft/tokens": z.number(),
    "sft/grad_norm": z.number(),
    "sft/lr": z.number(),
    "sft/skipped_step": z.number(),
  }),
});
export const sftEvalResult = z.object({
  metrics: z.object({ "val/loss": z.number(), "val/nll_sum": z.number(), "val/tokens": z.number() }),
});
export const pathResult = z.object({ path: z.string(), step: z.number().int() });
export const fingerprintResult = z.object({ params: z.string(), optimizer: z.string(), step: z.number().int() });

export type WorkerErrorBody = z.infer<typeof workerErrorBody>;
export type InitResult = z.infer<typeof initResult>;
export type ComputeLogProbsResult = z.infer<typeof computeLogProbsResult>;
export type UpdateResult = z.infer<typeof updateResult>;
export type SftStepResult = z.infer<typeof sftStepResult>;
export type SftEvalResult = z.infer<typeof sftEvalResult>;
export type PathResult = z.infer<typeof pathResult>;
export type FingerprintResult = z.infer<typeof fingerprintResult>;
