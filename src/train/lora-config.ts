/**
 * LoRA's model keys, verl's names (verl/trainer/config/model/hf_model.yaml): actor_rollout_ref.model.* for train,
 * model.* for sft. lora_rank 0 trains every weight; > 0 trains a peft adapter of that rank and freezes the base
 * (worker/agentrl_worker/lora.py).
 */
import { z } from "zod";
import type { WorkerInitConfig } from "./worker/index.js";

export const loraKeys = {
  lora_rank: z.number().int().nonnegative().default(0).describe("0: every weight trains; > 0: a LoRA adapter of this rank trains and the base model stays frozen (verl's key)"),
  lora_alpha: z.number().positive().default(16).describe("LoRA scaling: the adapter's update is B·A·(lora_alpha / lora_rank)"),
  target_modules: z
    .union([z.literal("all-linear"), z.array(z.string().min(1)).min(1)]).default("all-linear")
    .describe("LoRA: all-linear (every linear layer but the lm_head) or a list of module names (q_proj, v_proj, ...)"),
  exclude_modules: z
    .union([z.string().min(1), z.array(z.string().min(1))]).nullable().default(null)
    .describe("LoRA: module names (or a regex) left without an adapter"),
};

export interface LoraModelConfig {
  lora_rank: number;
  lora_alpha: number;
  target_modules: "all-linear" | string[];
  exclude_modules: string | string[] | null;
}

/** The worker's init fields for LoRA; none with lora_rank 0, so a full-weight run's init is what it was. */
export function loraWorkerConfig(model: LoraModelConfig): Partial<WorkerInitConfig> {
  if (model.lora_rank === 0) return {};
  return { lora_rank: model.lora_rank, lora_alpha: model.lora_alpha, target_modules: model.target_modules, exclude_modules: model.exclude_modules };
}
