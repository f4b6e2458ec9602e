/**
 * verl's dataset row schema (RLHFDataset): what `agentrl rollout` and `agentrl train` read, whoever wrote the file.
 * Unknown columns and keys are kept (verl datasets often carry extras), known ones are type-checked.
 */
import { z } from "zod";

export const chatMessageSchema = z
  .object({
    role: z.string(),
    content: z.string().nullable(),
  })
  .passthrough();

export const verlRowSchema = z
  .object({
    data_source: z.string(),
    prompt: z.array(chatMessageSchema).min(1, "prompt must hold at least one message"),
    ability: z.string().nullish(),
    agent_name: z.string().nullish(),
    reward_model: z
      .object({
        style: z.string().nullish(),
        ground_truth: z.unknown(),
      })
      .passthrough()
      .nullish(),
    extra_info: z
      .object({
        split: z.string().nullish(),
        index: z.number().int().nullish(),
        need_tools_kwargs: z.boolean().nullish(),
        tools_kwargs: z.record(z.string(), z.unknown()).nullish(),
        interaction_kwargs: z.record(z.string(), z.unknown()).nullish(),
      })
      .passthrough()
      .nullish(),
  })
  .passthrough();

export type VerlRow = z.infer<typeof verlRowSchema>;
