/**
 * verl's tool schema models (verl/tools/schemas.py), as zod. Like pydantic's default, unknown keys are dropped
 * (the search tool's `item:` disappears), and keys that were not set stay absent, matching verl's
 * `model_dump(exclude_unset=True, exclude_none=True)` when schemas go to the chat template.
 */
import { z } from "zod";

/** `exclude_none`: a YAML `null` is treated as unset. */
const optionalString = z
  .string()
  .nullish()
  .transform((v) => v ?? undefined);

export const functionPropertySchema = z.object({
  type: z.string(),
  description: optionalString.optional(),
  enum: z.array(z.string()).nullish().transform((v) => v ?? undefined).optional(),
});

export const functionParametersSchema = z.object({
  type: z.string(),
  properties: z.record(z.string(), functionPropertySchema),
  required: z.array(z.string()),
});

export const functionSchema = z.object({
  name: z.string().min(1),
  description: z.string(),
  parameters: functionParametersSchema.optional(),
  strict: z.boolean().optional(),
});

export const openAIFunctionToolSchema = z.object({
  type: z.string(),
  function: functionSchema,
});

export type OpenAIFunctionToolSchema = z.infer<typeof openAIFunctionToolSchema>;

/** Removes keys whose value is undefined so the JSON given to the chat template has only the keys that were set. */
export function schemaForTemplate(schema: OpenAIFunctionToolSchema): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
}
