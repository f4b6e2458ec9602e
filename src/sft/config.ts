/**
 * `agentrl sft`'s configuration: verl's SFT trainer keys (verl/trainer/config/sft_trainer.yaml: data.multiturn.*,
 * data.max_length, data.truncation, model.partial_pretrain, optim.*, trainer.*) so a verl user reads it at a glance.
 * Strict like the train config: a misspelled key is an error naming the nearest valid key.
 */
import { applyChatTemplateKwargs, customChatTemplateKeys } from "../config/chat-template-keys.js";
import { z } from "zod";
import type { WorkerInitConfig } from "../train/worker/index.js";
import { LR_SCHEDULER_TYPES } from "../train/worker/protocol.js";
import { loraKeys, loraWorkerConfig } from "../train/lora-config.js";

const files = z.union([z.string(), z.array(z.string()).min(1)]);

export const TRUNCATION_MODES = ["error", "right", "drop"] as const;

export const sftConfigSchema = z.strictObject({
  data: z
    .strictObject({
      train_files: files.describe(
        "parquet or JSON-lines files of conversations (a messages column), or trajectory files written by agentrl rollout/train",
      ),
      val_files: files.nullable().default(null).describe("held-out files of the same kinds for the validation loss; null = none"),
      train_batch_size: z.number().int().positive().default(8).describe("conversations per optimizer step"),
      max_length: z.number().int().positive().default(1024).describe("token budget of one conversation (prompt + all turns)"),
      truncation: z
        .enum(TRUNCATION_MODES)
        .default("error")
        .describe("a conversation over max_length: error (name the row), right (cut the end, counted) or drop (skip it, counted)"),
      apply_chat_template_kwargs: applyChatTemplateKwargs("every conversation's render (use the same in agentrl train)"),
      multiturn: z
        .strictObject({
          enable: z.literal(true).default(true).describe("multi-turn conversations (the only kind agentrl trains on)"),
          messages_key: z.string().default("messages").describe("column holding the list of chat messages"),
          tools_key: z.string().default("tools").describe("column holding the tool schemas the template renders (optional per row)"),
        })
        .prefault({}),
      min_reward: z
        .number()
        .nullable()
        .default(null)
        .describe("trajectory files only: keep completed trajectories whose reward is at least this (rejection sampling); null = all completed"),
      shuffle: z.boolean().default(true).describe("shuffle the conversations each epoch (seeded)"),
      seed: z.number().int().default(1).describe("seed of the data order"),
      max_token_len_per_gpu: z
        .number().int().positive().default(16384)
        .describe("token budget of a micro-batch per GPU: its conversations' tokens when packed (use_remove_padding), conversations × the longest when padded"),
    })
    .describe("data"),
  model: z.strictObject({
    partial_pretrain: z.string().describe("Hugging Face model folder to start from, or a Hub id org/name[@revision] resolved through huggingface_hub's cache: weights, tokenizer and chat template"),
    enable_gradient_checkpointing: z.boolean().default(false).describe("activation checkpointing: less memory, more compute"),
    ...customChatTemplateKeys,
    ...loraKeys,
  }),
  use_remove_padding: z
    .boolean().default(true)
    .describe("pack each micro-batch's conversations into one sequence without padding where flash-attn's varlen kernel runs it (verl's top-level SFT key); elsewhere, and with false, pad to the longest"),
  optim: z
    .strictObject({
      lr: z.number().positive().default(1e-5).describe("AdamW learning rate"),
      betas: z.tuple([z.number(), z.number()]).default([0.9, 0.95]).describe("AdamW betas"),
      weight_decay: z.number().nonnegative().default(0.01).describe("AdamW weight decay"),
      warmup_steps_ratio: z.number().min(0).max(1).default(0.1).describe("linear warm-up over this fraction of the optimizer steps"),
      clip_grad: z.number().positive().default(1.0).describe("max global gradient norm"),
      lr_scheduler: z.enum(LR_SCHEDULER_TYPES).default("cosine").describe("after warm-up: constant, or cosine decay to 0"),
    })
    .prefault({}),
  trainer: z
    .strictObject({
      project_name: z.string().default("agentrl").describe("project name, recorded in the run folder's config"),
      experiment_name: z.string().default("sft").describe("run name: the run folder is runs/<experiment_name>"),
      default_local_dir: z.string().nullable().default(null).describe("run folder; null = runs/<experiment_name>"),
      total_epochs: z.number().int().positive().default(1).describe("passes over the training conversations"),
      total_training_steps: z.number().int().positive().nullable().default(null).describe("null = total_epochs over the data"),
      save_freq: z.number().int().default(-1).describe("checkpoint every N steps; -1 = only at the end and on Ctrl-C"),
      max_ckpt_to_keep: z
        .number().int().positive().nullable().default(null)
        .describe("checkpoints kept in the run folder, the newest ones; null = all (verl's key)"),
      test_freq: z.number().int().default(-1).describe("validation loss every N steps (and at the end); -1 = only at the end"),
      n_gpus_per_node: z.number().int().positive().default(1).describe("training ranks (torchrun --nproc_per_node)"),
      nnodes: z.number().int().positive().default(1).describe("training nodes (torchrun --nnodes)"),
      torchrun_args: z.array(z.string()).default([]).describe("multi-node rendezvous flags"),
      seed: z.number().int().default(0).describe("seed of the worker"),
    })
    .prefault({}),
});

export type SftConfig = z.infer<typeof sftConfigSchema>;

/** Optimizer steps of a run: total_training_steps, else every epoch's full batches (a last partial batch counts). */
export function sftTotalSteps(config: SftConfig, trainSize: number): number {
  if (config.trainer.total_training_steps !== null) return config.trainer.total_training_steps;
  return Math.max(1, Math.ceil(trainSize / config.data.train_batch_size) * config.trainer.total_epochs);
}

/** Linear warm-up steps: optim.warmup_steps_ratio of the run's steps. */
export function sftWarmupSteps(config: SftConfig, total: number): number {
  return Math.round(config.optim.warmup_steps_ratio * total);
}

/** The training worker's init config for SFT (docs/worker-protocol.md lists each field). */
export function sftWorkerConfig(config: SftConfig, total: number): WorkerInitConfig {
  return {
    model_path: config.model.partial_pretrain,
    seed: config.trainer.seed,
    lr: config.optim.lr,
    betas: config.optim.betas,
    weight_decay: config.optim.weight_decay,
    lr_warmup_steps: sftWarmupSteps(config, total),
    lr_scheduler_type: config.optim.lr_scheduler,
    total_optimizer_steps: total,
    grad_clip: config.optim.clip_grad,
    gradient_checkpointing: config.model.enable_gradient_checkpointing,
    micro_batch_token_budget: config.data.max_token_len_per_gpu,
    use_remove_padding: config.use_remove_padding,
    ...loraWorkerConfig(config.model),
  };
}
