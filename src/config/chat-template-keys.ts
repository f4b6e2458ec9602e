/**
 * The chat-template keys verl users set, shared by the rollout, train and sft configs: a template in place of the
 * model folder's (under the model section) and extra template variables (under data).
 */
import { z } from "zod";

/** actor_rollout_ref.model (sft: model) .custom_chat_template and .custom_chat_template_file. */
export const customChatTemplateKeys = {
  custom_chat_template: z
    .string().nullable().default(null)
    .describe("a Jinja chat template used in place of the model folder's for every render (verl's key)"),
  custom_chat_template_file: z
    .string().nullable().default(null)
    .describe("a file holding that template; give one of the two"),
};

/** data.apply_chat_template_kwargs. */
export const applyChatTemplateKwargs = (what: string) =>
  z.record(z.string(), z.unknown()).default({}).describe(`extra chat-template variables for ${what}, e.g. {enable_thinking: false} for Qwen3; verl's key`);
