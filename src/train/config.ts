/**
 * `agentrl train`'s configuration: one tree with verl's key names and meanings (data.*, actor_rollout_ref.*,
 * algorithm.*, trainer.*), so a verl user can read it at a glance. Strict: a misspelled key is an error naming the
 * nearest valid key, never a silent no-op. docs/config.md lists every key with its default.
 */
import { z } from "zod";
import { applyChatTemplateKwargs, customChatTemplateKeys } from "../config/chat-template-keys.js";
import { overlongBufferSchema } from "../rewards/overlong.js";
import { customRewardFunctionSchema, rolloutSchema } from "../rollout/config.js";
import { ADV_ESTIMATORS, KL_LOSS_TYPES, LOSS_AGG_MODES, MASTER_DTYPES, POLICY_LOSS_MODES, ROLLOUT_IS_MODES } from "./worker/protocol.js";
import { TRAINING_MODES } from "./schedule/modes.js";
import { loraKeys } from "./lora-config.js";

export const WEIGHT_SYNC_METHODS = ["disk", "distributed", "tensor", "auto"] as const;

const files = z.union([z.string(), z.array(z.string()).min(1)]);

/** How the trainer's weights reach the inference servers after each update (docs/architecture.md, Weight sync). */
const updateWeightsSchema = z.strictObject({
  method: z
    .enum(WEIGHT_SYNC_METHODS).default("disk")
    .describe(
      "disk: the worker writes a Hugging Face folder and every server loads it (/update_weights_from_disk); distributed: the trainer's rank 0 broadcasts the tensors to every server over a process group (NCCL on GPUs, gloo on the CPU; /update_weights_from_distributed); tensor: CUDA IPC handles to a server on the same GPUs (trainer.colocate; /update_weights_from_tensor; unverified); auto: distributed, or disk when colocated. Where no group can form (a server without the endpoint, a failed rendezvous), a one-line warning and disk",
    ),
  master_address: z
    .string().min(1).nullable().default(null)
    .describe("distributed: the address the servers reach the trainer's rank 0 at; null = 127.0.0.1 when every server is local, else this machine's first external IPv4 address"),
  master_port: z.number().int().min(0).max(65535).default(0).describe("distributed: the rendezvous port on the trainer's rank 0; 0 = a free port"),
  group_timeout: z
    .number().positive().default(600)
    .describe("distributed: seconds every server may take to join the group, and one bucket's broadcast to finish (it waits for running generations, as a disk update does)"),
});

export const trainConfigSchema = z.strictObject({
  data: z
    .strictObject({
      train_files: files.describe("training dataset parquet file(s) in verl's schema"),
      val_files: files.nullable().default(null).describe("validation parquet file(s); null = no validation"),
      train_batch_size: z.number().int().positive().default(8).describe("prompts per training step"),
      val_max_samples: z.number().int().positive().nullable().default(null).describe("validate on the first N prompts only"),
      max_prompt_length: z.number().int().positive().default(1024).describe("tokens of the rendered prompt"),
      max_response_length: z.number().int().positive().default(1024).describe("tokens of the whole multi-turn response"),
      shuffle: z.boolean().default(true).describe("shuffle the training prompts each epoch (seeded)"),
      seed: z.number().int().default(1).describe("seed of the data order"),
      filter_overlong_prompts: z.boolean().default(true).describe("skip prompts longer than max_prompt_length"),
      apply_chat_template_kwargs: applyChatTemplateKwargs("every render (prompts, tool and user turns, the drift check)"),
    })
    .describe("data"),
  actor_rollout_ref: z.strictObject({
    model: z.strictObject({
      path: z.string().describe("Hugging Face model folder, or a Hub id org/name[@revision] resolved to its snapshot in huggingface_hub's cache (HF_HOME, HF_HUB_CACHE; HF_HUB_OFFLINE=1: the cache only): the initial policy, tokenizer and chat template"),
      enable_gradient_checkpointing: z.boolean().default(false).describe("activation checkpointing in the decoder layers: less memory, more compute"),
      ...customChatTemplateKeys,
      use_remove_padding: z
        .boolean().default(true)
        .describe("pack each micro-batch's sequences into one without padding where flash-attn's varlen kernel runs it (a GPU with flash_attn); elsewhere, and with false, pad to the longest"),
      ...loraKeys,
      lora: z
        .strictObject({
          merge: z
            .boolean().default(false)
            .describe("LoRA: false = each sync sends the adapter alone (/load_lora_adapter under the step's version, requests name it in lora_path); true = the merged weights W + B·A·alpha/r through update_weights.method (disk or distributed), the servers need no LoRA support"),
        })
        .prefault({}),
    }),
    actor: z
      .strictObject({
        optim: z
          .strictObject({
            lr: z.number().positive().default(1e-6).describe("AdamW learning rate"),
            lr_warmup_steps: z
              .number().int().default(-1)
              .describe("linear warm-up from 0 over this many optimizer steps; negative (verl's -1) = lr_warmup_steps_ratio decides"),
            lr_warmup_steps_ratio: z
              .number().min(0).max(1).default(0)
              .describe("warm-up as a fraction of the run's optimizer steps, when lr_warmup_steps is negative"),
            lr_scheduler_type: z
              .enum(["constant", "cosine"]).default("constant")
              .describe("after the warm-up: constant, or cosine decay to min_lr_ratio × lr at the run's last optimizer step"),
            warmup_style: z
              .enum(["constant", "cosine"]).nullable().default(null)
              .describe("verl's older name of lr_scheduler_type (deprecated there); when set it wins"),
            min_lr_ratio: z.number().min(0).max(1).default(0).describe("cosine: the final learning rate as a fraction of lr"),
            num_cycles: z.number().positive().default(0.5).describe("cosine: waves over the decay; 0.5 = one half-wave from lr down to the minimum"),
            weight_decay: z.number().nonnegative().default(0.01).describe("AdamW weight decay"),
            betas: z.tuple([z.number(), z.number()]).default([0.9, 0.999]).describe("AdamW betas"),
          })
          .prefault({}),
        ppo_mini_batch_size: z
          .number().int().positive().nullable().default(null)
          .describe("prompts per optimizer step (verl counts prompts, not trajectories); null = train_batch_size"),
        ppo_epochs: z.number().int().positive().default(1).describe("passes over each step's batch"),
        shuffle: z.boolean().default(false).describe("mini-batches of trajectories drawn at random across prompts (seeded by the optimizer step) instead of whole prompt groups; TRL's GRPOTrainer draws its mini-batches so, and its reward rose faster per step on the CPU demo for it"),
        ppo_max_token_len_per_gpu: z
          .number().int().positive().default(16384)
          .describe("token budget of a micro-batch per GPU: its sequences' tokens when packed (model.use_remove_padding), sequences × the longest when padded"),
        logprob_chunk_tokens: z
          .number().int().positive().default(1024)
          .describe("tokens per chunk of the lm_head and log-softmax: bounds the float32 tokens × vocabulary memory of log-probs and entropy"),
        clip_ratio_low: z.number().nonnegative().default(0.2).describe("PPO clip below 1 (ratio ≥ 1 − low)"),
        clip_ratio_high: z.number().nonnegative().default(0.2).describe("PPO clip above 1 (ratio ≤ 1 + high); > low is DAPO's clip-higher"),
        clip_ratio_c: z.number().gt(1).default(3.0).describe("dual-clip constant"),
        loss_agg_mode: z.enum(LOSS_AGG_MODES).default("token-mean").describe("how token losses become one loss (verl's agg_loss)"),
        policy_loss: z
          .strictObject({
            loss_mode: z
              .enum(POLICY_LOSS_MODES).default("vanilla")
              .describe("vanilla: PPO's clipped surrogate with dual clip; gspo: GSPO's sequence-level ratio (its policy loss seq-mean-token-mean; set clip_ratio_low/high to GSPO's 3e-4/4e-4)"),
          })
          .prefault({}),
        loss_scale_factor: z.number().positive().nullable().default(null).describe("divisor of seq-mean-token-sum-norm (Dr.GRPO); null = data.max_response_length"),
        use_kl_loss: z.boolean().default(false).describe("KL-to-reference loss (keeps a frozen reference model)"),
        kl_loss_coef: z.number().nonnegative().default(0.001).describe("weight of the KL loss"),
        kl_loss_type: z.enum(KL_LOSS_TYPES).default("low_var_kl").describe("KL estimator (verl's kl_penalty kinds)"),
        entropy_coeff: z.number().default(0).describe("entropy bonus weight"),
        grad_clip: z.number().positive().default(1.0).describe("max global gradient norm"),
        fsdp_config: z
          .strictObject({
            dtype: z.enum(MASTER_DTYPES).default("float32").describe("master weights; compute is bf16 on GPU"),
            reshard_after_forward: z.boolean().default(true).describe("FSDP: free gathered parameters after the forward pass (less memory)"),
            param_offload: z
              .boolean().default(false)
              .describe("keep parameter and gradient shards in CPU memory (FSDP2 CPUOffloadPolicy); the optimizer steps on the CPU"),
            optimizer_offload: z.boolean().default(false).describe("keep the optimizer state in CPU memory between optimizer steps"),
          })
          .prefault({}),
      })
      .prefault({}),
    ref: z
      .strictObject({
        model: z
          .strictObject({
            path: z
              .string()
              .min(1)
              .nullable()
              .default(null)
              .describe(
                "the KL reference's own model (folder or Hub id; same tokenizer as the policy). Default: the policy's starting model, which with LoRA is the policy with its adapter disabled (no second copy)",
              ),
          })
          .prefault({}),
        fsdp_config: z
          .strictObject({
            param_offload: z.boolean().default(false).describe("keep the reference model's shards (actor.use_kl_loss) in CPU memory, copied in layer by layer"),
          })
          .prefault({}),
      })
      .prefault({}),
    rollout: rolloutSchema
      .extend({
        name: z
          .enum(["embedded", "sglang"]).default("embedded")
          .describe("embedded: agentrl starts its CPU/GPU engine; sglang: attach to server.urls"),
        update_weights_bucket_megabytes: z
          .number().int().positive().default(512)
          .describe("most megabytes of tensors per weight update request (method distributed or tensor): what a server holds at once besides its weights (verl's key)"),
        update_weights: updateWeightsSchema.prefault({}),
        val_kwargs: z
          .strictObject({
            temperature: z.number().nonnegative().default(0).describe("validation sampling temperature; 0 = greedy"),
            top_p: z.number().gt(0).lte(1).default(1.0).describe("validation nucleus sampling"),
            top_k: z.number().int().default(-1).describe("validation top-k; -1 = all"),
            n: z.number().int().positive().default(1).describe("samples per validation prompt; pass@k is reported when > 1"),
          })
          .prefault({}),
      })
      .prefault({}),
  }),
  algorithm: z
    .strictObject({
      adv_estimator: z.enum(ADV_ESTIMATORS).default("grpo").describe("advantage estimator, computed in the worker"),
      norm_adv_by_std_in_grpo: z.boolean().default(true).describe("false = Dr.GRPO"),
      rollout_is_threshold: z
        .number().positive().nullable().default(null)
        .describe("importance sampling against the engine's behaviour log-probs: each sampled token's loss is weighted by π_old/π_rollout, the trainer's recomputed log-prob over the engine's (stale weights under async training, or kernel mismatch); null = off"),
      rollout_is_mode: z
        .enum(ROLLOUT_IS_MODES).default("truncate")
        .describe("truncate: weight min(π_old/π_rollout, rollout_is_threshold) (verl's TIS); mask: weight π_old/π_rollout, and 0 for tokens above the threshold (AReaL's decoupled PPO, behav_imp_weight_cap)"),
      filter_groups: z
        .strictObject({
          enable: z.boolean().default(false).describe("dynamic sampling: drop groups whose rewards are all equal"),
          max_num_gen_batches: z.number().int().positive().default(4).describe("most rollout rounds per step to refill the batch"),
        })
        .prefault({}),
    })
    .prefault({}),
  custom_reward_function: customRewardFunctionSchema.prefault({}),
  reward_model: z
    .strictObject({ overlong_buffer: overlongBufferSchema.prefault({}) })
    .prefault({})
    .describe("reward_model: DAPO's overlong shaping (agentrl has no reward-model worker: reward_model.enable stays false)"),
  async_training: z
    .strictObject({
      mode: z
        .enum(TRAINING_MODES).default("sync")
        .describe(
          "sync: generate a batch, train on it, sync weights, repeat; one_step_off: generate step k+1's batch while training on step k's (verl's one_step_off_policy); fully_async: groups stream into a buffer and each step trains on the first train_batch_size ready ones (verl's fully_async_policy). verl picks these by entry point, not by a key",
        ),
      staleness_threshold: z
        .number().nonnegative().default(1)
        .describe(
          "fully_async: how far generation may run ahead, in batches (verl's meaning): groups started ≤ (steps trained + 1 + staleness_threshold) × train_batch_size. A group whose staleness (policy versions between the weights it started with and the weights trained) would exceed ceil(staleness_threshold) is dropped and counted (async/dropped_stale); verl drops none. With trigger_parameter_sync_step > 1 both rules count weight syncs",
        ),
      trigger_parameter_sync_step: z
        .number().int().positive().default(1)
        .describe(
          "fully_async: updates between weight syncs (verl's local updates). Each step still updates on data.train_batch_size groups as soon as they are ready; the engine gets the weights every k-th step (and at validation steps and the last). staleness_threshold then counts syncs: admission allows k × (1 + staleness_threshold) batches ahead of the last sync, and a group is dropped when more than ceil(staleness_threshold) syncs separate its start from its update. verl's like-for-like setting: k × train_batch_size = the sync run's train_batch_size. 1 in the other modes",
        ),
      engine_priority: z
        .boolean().default(false)
        .describe(
          "fully_async: every /generate carries SGLang's request priority, minus the step its group is generated for, so a server launched with --enable-priority-scheduling (higher values first, its default) decodes the oldest groups' waiting requests first: those nearest the staleness bound. A server without priority scheduling ignores it (unless started with --abort-on-priority-when-disabled, which refuses it). The embedded engine a run starts orders its queue by priority too. agentrl's own key",
        ),
      partial_rollout: z
        .boolean().default(true)
        .describe(
          "one_step_off and fully_async: a weight sync pauses generation (/pause_generation abort), loads the weights and continues; each cut generation goes on from its last token on the new weights, every token recording the version that sampled it (version_spans). false: one_step_off's sync waits for the whole next batch, every turn (verl's one_step_off_policy syncs only between batches), so each batch is sampled by one version and seeded runs repeat themselves; fully_async's load waits for the generations in flight to finish",
        ),
    })
    .prefault({}),
  trainer: z
    .strictObject({
      project_name: z.string().default("agentrl").describe("project name: the wandb run's project, and TensorBoard's run is named <project_name>/<experiment_name>, as verl names its tracking runs"),
      experiment_name: z.string().default("run").describe("run name: the run folder is runs/<experiment_name>, and the wandb run's name"),
      default_local_dir: z.string().nullable().default(null).describe("run folder; null = runs/<experiment_name>"),
      total_epochs: z.number().int().positive().default(1).describe("passes over the training prompts"),
      total_training_steps: z.number().int().positive().nullable().default(null).describe("null = total_epochs over the data"),
      save_freq: z.number().int().default(-1).describe("checkpoint every N steps; -1 = only at the end and on Ctrl-C"),
      max_actor_ckpt_to_keep: z
        .number().int().positive().nullable().default(null)
        .describe("checkpoints kept in the run folder, the newest ones (each holds the weights and the optimizer); null = all (verl's key)"),
      test_freq: z.number().int().default(-1).describe("validate every N steps; -1 = never during training"),
      val_before_train: z.boolean().default(false).describe("validate once before the first step (metrics line with step 0)"),
      val_only: z
        .boolean().default(false)
        .describe("validate and exit without training: model.path, or with --resume the last checkpoint (metrics line at its step); needs data.val_files"),
      nnodes: z.number().int().positive().default(1).describe("training nodes (torchrun --nnodes)"),
      n_gpus_per_node: z.number().int().positive().default(1).describe("training ranks per node (torchrun --nproc_per_node)"),
      torchrun_args: z.array(z.string()).default([]).describe("multi-node rendezvous flags, e.g. [--node_rank, 0, --rdzv_endpoint, host:29500]"),
      colocate: z.boolean().default(false).describe("SGLang shares the GPUs: release its memory around training"),
      logger: z
        .array(
          z.enum(["console", "tensorboard", "wandb"], {
            error: (issue) => `expected "console", "tensorboard" or "wandb", got ${JSON.stringify(issue.input)}`,
          }),
        )
        .default(["console"]).describe("where metrics go besides metrics.jsonl: tensorboard writes runs/<name>/tensorboard (needs the tensorboard package); wandb logs every metrics line at its step to a wandb run with the effective config (project_name, experiment_name; files in runs/<name>/wandb; WANDB_MODE=offline works; needs the wandb package), and --resume continues that run. A tracker that cannot log is noted once and the run goes on. verl's other trackers (mlflow, swanlab, ...) are dropped with a note"),
      log_val_generations: z
        .number().int().nonnegative().default(0)
        .describe("with wandb in logger: a table of this many validation samples (input, output, score; the same prompts at every validation) under val/generations at each validation (verl's key)"),
      seed: z.number().int().default(0).describe("seed of the worker (init, dropout) and of sampling"),
    })
    .prefault({}),
});

export type TrainConfig = z.infer<typeof trainConfigSchema>;
export type UpdateWeightsConfig = z.infer<typeof updateWeightsSchema>;

export function asList(value: string | string[] | null): string[] {
  if (value === null) return [];
  return Array.isArray(value) ? value : [value];
}

export function totalSteps(config: TrainConfig, trainSize: number): number {
  if (config.trainer.total_training_steps !== null) return config.trainer.total_training_steps;
  return Math.max(1, Math.floor((trainSize * config.trainer.total_epochs) / config.data.train_batch_size));
}

/** Optimizer steps per training step: one per mini-batch of prompts, for each of ppo_epochs passes. */
export function optimizerStepsPerStep(config: TrainConfig): number {
  const actor = config.actor_rollout_ref.actor;
  const miniBatch = actor.ppo_mini_batch_size ?? config.data.train_batch_size;
  return Math.ceil(config.data.train_batch_size / miniBatch) * actor.ppo_epochs;
}

/**
 * The run's optimizer steps, what the learning-rate schedule spans (cosine end, warm-up ratio). An upper bound: a step
 * whose groups were dropped (dynamic sampling, failures) makes fewer, so a cosine then ends a little above its minimum.
 */
export function totalOptimizerSteps(config: TrainConfig, trainSize: number): number {
  return totalSteps(config, trainSize) * optimizerStepsPerStep(config);
}
