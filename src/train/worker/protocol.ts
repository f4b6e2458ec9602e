/**
 * The worker protocol's one definition (docs/worker-protocol.md): every request the CLI sends and every reply and
 * event the worker sends. The client checks its requests and the worker's replies against these zod schemas;
 * `npm run protocol:schema` turns them into worker/agentrl_worker/protocol.schema.json, which the Python worker checks
 * every request (and its own replies) against. Change a message here, regenerate, and both sides follow.
 *
 * Only what a JSON Schema can say lives here (types, enums, ranges, required and unknown fields). Rules that tie
 * two fields together (use_kl_loss needs use_ref, cosine needs total_optimizer_steps, ...) are the worker's
 * (config.py), checked at `init`.
 */
import { z } from "zod";

export const PROTOCOL_VERSION = 1;

// The worker's enumerations, declared once: the train and sft config schemas take them from here, and the worker's
// own constants are tested against the generated schema (worker/tests/test_protocol.py).
export const MASTER_DTYPES = ["float32", "bfloat16"] as const;
export const LR_SCHEDULER_TYPES = ["constant", "cosine"] as const;
export const LOSS_AGG_MODES = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"] as const;
/** The policy loss: PPO's clipped surrogate with dual clip, or GSPO's sequence-level ratios (worker algos.policy_loss). */
export const POLICY_LOSS_MODES = ["vanilla", "gspo"] as const;
export const KL_LOSS_TYPES = ["k1", "kl", "abs", "k2", "mse", "k3", "low_var_kl"] as const;
export const ADV_ESTIMATORS = ["grpo", "rloo"] as const;
/** What the rollout importance weight does above rollout_is_threshold: verl's TIS truncates, AReaL's decoupled PPO masks. */
export const ROLLOUT_IS_MODES = ["truncate", "mask"] as const;

/** Tensor dtypes in SGLang's spelling, as /update_weights_from_distributed's `dtypes` carry them. */
export const WEIGHT_DTYPES = ["bfloat16", "float32", "float16"] as const;
export const WEIGHT_GROUP_BACKENDS = ["nccl", "gloo"] as const;

const filePath = z.string().min(1);
const weightNames = z.array(z.string().min(1)).min(1).describe("Hugging Face parameter names, in broadcast order");
const int = () => z.number().int();
const beta = z.number().min(0).lt(1);

/** `init`'s settings, with verl's names; the defaults live in the worker (config.py) and in the protocol doc. */
export const initConfig = z.strictObject({
  model_path: z.string().min(1).describe("Hugging Face model folder"),
  dtype: z.enum(MASTER_DTYPES).optional(),
  seed: int().optional(),
  lr: z.number().nonnegative().optional(),
  betas: z.tuple([beta, beta]).optional(),
  weight_decay: z.number().nonnegative().optional(),
  lr_warmup_steps: int().optional().describe("negative: lr_warmup_steps_ratio decides"),
  lr_warmup_steps_ratio: z.number().min(0).max(1).optional(),
  lr_scheduler_type: z.enum(LR_SCHEDULER_TYPES).optional(),
  min_lr_ratio: z.number().min(0).max(1).optional(),
  num_cycles: z.number().positive().optional(),
  total_optimizer_steps: int().min(1).nullable().optional(),
  grad_clip: z.number().positive().optional(),
  reshard_after_forward: z.boolean().optional(),
  use_ref: z.boolean().optional(),
  ref_offload: z.boolean().optional(),
  ref_model_path: z.string().min(1).nullable().optional(),
  gradient_checkpointing: z.boolean().optional(),
  micro_batch_token_budget: int().min(1).optional(),
  use_remove_padding: z.boolean().optional(),
  share_prefix: z.boolean().optional(),
  packed_sdpa: z.boolean().optional(),
  logprob_chunk_tokens: int().min(1).optional(),
  param_offload: z.boolean().optional(),
  optimizer_offload: z.boolean().optional(),
  temperature: z.number().positive().optional(),
  ppo_mini_batch_size: int().min(1).nullable().optional(),
  shuffle: z.boolean().optional(),
  ppo_epochs: int().min(1).optional(),
  clip_ratio_low: z.number().nonnegative().optional(),
  clip_ratio_high: z.number().nonnegative().optional(),
  clip_ratio_c: z.number().gt(1).optional(),
  loss_mode: z.enum(POLICY_LOSS_MODES).optional(),
  loss_agg_mode: z.enum(LOSS_AGG_MODES).optional(),
  loss_scale_factor: z.number().positive().nullable().optional(),
  max_response_length: int().positive().nullable().optional(),
  use_kl_loss: z.boolean().optional(),
  kl_loss_coef: z.number().nonnegative().optional(),
  kl_loss_type: z.enum(KL_LOSS_TYPES).optional(),
  entropy_coeff: z.number().optional(),
  adv_estimator: z.enum(ADV_ESTIMATORS).optional(),
  norm_adv_by_std_in_grpo: z.boolean().optional(),
  rollout_is_threshold: z.number().positive().nullable().optional(),
  rollout_is_mode: z.enum(ROLLOUT_IS_MODES).optional(),
  lora_rank: int().min(0).optional().describe("0: every weight trains; > 0: a LoRA adapter of this rank (peft) trains, the base stays frozen"),
  lora_alpha: z.number().positive().optional(),
  target_modules: z.union([z.literal("all-linear"), z.array(z.string().min(1)).min(1)]).optional(),
  exclude_modules: z.union([z.string().min(1), z.array(z.string().min(1))]).nullable().optional(),
});
export type WorkerInitConfig = z.input<typeof initConfig>;

/** `{id, cmd, ...fields}`; unknown fields are refused, so a misspelt field fails instead of being ignored. */
function request<C extends string, S extends z.ZodRawShape>(cmd: C, fields: S) {
  return z.strictObject({ id: int().min(0), cmd: z.literal(cmd), ...fields });
}

/** Every command the worker serves, keyed by its `cmd`. */
export const requests = {
  init: request("init", { config: initConfig }),
  compute_log_probs: request("compute_log_probs", { batch: filePath, out: filePath }),
  update: request("update", { batch: filePath, log_probs: filePath.nullable().optional() }),
  sft_step: request("sft_step", { batch: filePath }),
  sft_eval: request("sft_eval", { batch: filePath }),
  save_weights: request("save_weights", { dir: filePath, dtype: z.enum(WEIGHT_DTYPES).optional() }),
  save_adapter: request("save_adapter", { dir: filePath }),
  save_checkpoint: request("save_checkpoint", { dir: filePath }),
  load_checkpoint: request("load_checkpoint", { dir: filePath }),
  fingerprint: request("fingerprint", {}),
  init_weights_group: request("init_weights_group", {
    master_address: z.string().min(1).describe("host of the rendezvous rank 0 opens; the servers connect to it"),
    master_port: int().min(1).max(65535),
    world_size: int().min(2).describe("1 (the trainer) + every server rank"),
    group_name: z.string().min(1),
    backend: z.enum(WEIGHT_GROUP_BACKENDS),
    timeout_s: z.number().positive().describe("how long to wait for every rank to join, and for each broadcast"),
  }),
  plan_weight_buckets: request("plan_weight_buckets", {
    bucket_bytes: int().min(1),
    dtype: z.enum(WEIGHT_DTYPES).optional().describe("default: the model's own torch_dtype"),
  }),
  broadcast_weights: request("broadcast_weights", { names: weightNames, dtype: z.enum(WEIGHT_DTYPES).optional() }),
  serialize_weights: request("serialize_weights", { names: weightNames, dtype: z.enum(WEIGHT_DTYPES).optional() }),
  shutdown: request("shutdown", {}),
};
export type Command = keyof typeof requests;
export const COMMANDS = Object.keys(requests) as Command[];
/** A command's fields besides `id` and `cmd`. */
export type RequestFields<C extends Command> = Omit<z.input<(typeof requests)[C]>, "id" | "cmd">;

export const readyEvent = z.strictObject({
  event: z.literal("ready"),
  protocol: z.literal(PROTOCOL_VERSION),
  world_size: int().positive(),
  pid: int(),
});

export const workerErrorBody = z.strictObject({
  type: z.string().describe("InputError (the caller's input), ProtocolError (not a command), or the Python exception class"),
  message: z.string(),
  traceback: z.string().optional(),
});

const replyId = int().nullable().describe("the request's id; null when the request had none");

export const errorReply = z.strictObject({ id: replyId, ok: z.literal(false), error: workerErrorBody });
/** Tells a success from a failure; the success is then checked against its command's reply schema. */
export const replyEnvelope = z.union([z.object({ id: replyId, ok: z.literal(true) }).passthrough(), errorReply]);

const metrics = z.record(z.string(), z.number());
const pathResult = z.strictObject({ path: z.string(), step: int() });

/** Each command's result: the fields of its successful reply besides `id` and `ok`. */
export const results = {
  init: z.strictObject({
    world_size: int().positive(),
    device: z.string(),
    fsdp: z.enum(["fsdp2", "fsdp1", "none"]),
    load_s: z.number(),
  }),
  compute_log_probs: z.strictObject({ path: z.string(), metrics }),
  update: z.strictObject({
    metrics,
    step: int(),
    advantages: z.array(z.number()).optional().describe("one per batch row, in row order"),
  }),
  sft_step: z.strictObject({
    step: int(),
    metrics: z.strictObject({
      "sft/loss": z.number(),
      "sft/tokens": z.number(),
      "sft/grad_norm": z.number().optional(),
      "sft/lr": z.number(),
      "sft/skipped_step": z.number(),
    }),
  }),
  sft_eval: z.strictObject({
    metrics: z.strictObject({ "val/loss": z.number(), "val/nll_sum": z.number(), "val/tokens": z.number() }),
  }),
  save_weights: pathResult,
  save_adapter: z.strictObject({ path: z.string(), step: int(), bytes: int().nonnegative().describe("size of adapter_model.safetensors") }),
  save_checkpoint: pathResult,
  load_checkpoint: pathResult,
  fingerprint: z.strictObject({ params: z.string(), optimizer: z.string(), step: int() }),
  init_weights_group: z.strictObject({ backend: z.enum(WEIGHT_GROUP_BACKENDS) }),
  plan_weight_buckets: z.strictObject({
    buckets: z.array(
      z.strictObject({ names: z.array(z.string()), dtypes: z.array(z.enum(WEIGHT_DTYPES)), shapes: z.array(z.array(int().nonnegative())) }),
    ).describe("every parameter once, in order; each bucket is one /update_weights_from_distributed"),
  }),
  broadcast_weights: z.strictObject({ tensors: int().nonnegative(), bytes: int().nonnegative().describe("0 on ranks other than 0") }),
  serialize_weights: z.strictObject({ serialized: z.string().describe("base64 pickle of [(name, tensor)] with CUDA IPC handles") }),
  shutdown: z.strictObject({}),
} satisfies Record<Command, z.ZodType>;
export type Result<C extends Command> = z.output<(typeof results)[C]>;

/** A command's whole successful reply, `{id, ok: true, ...result}`. */
export function okReply<C extends Command>(cmd: C) {
  return results[cmd].extend({ id: replyId, ok: z.literal(true) });
}

export type WorkerErrorBody = z.infer<typeof workerErrorBody>;
export type InitResult = Result<"init">;
export type ComputeLogProbsResult = Result<"compute_log_probs">;
export type UpdateResult = Result<"update">;
export type SftStepResult = Result<"sft_step">;
export type SftEvalResult = Result<"sft_eval">;
export type PathResult = Result<"save_weights">;
export type FingerprintResult = Result<"fingerprint">;
export type WeightBucketPlan = Result<"plan_weight_buckets">;
