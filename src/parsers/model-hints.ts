/**
 * What `auto` needs from a Hugging Face model folder, read without loading a tokenizer: the chat template
 * (tokenizer_config.json `chat_template`, or chat_template.jinja) and the added tokens (tokenizer.json).
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { InputError } from "../errors.js";

const TokenizerConfig = z.looseObject({
  chat_template: z
    .union([z.string(), z.array(z.looseObject({ name: z.string(), template: z.string() }))])
    .optional(),
});
const TokenizerJson = z.looseObject({
  added_tokens: z.array(z.looseObject({ content: z.string() })).optional(),
});

function readJson<T>(file: string, schema: z.ZodType<T>): T | undefined {
  if (!existsSync(file)) return undefined;
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new InputError(`${file}: not valid JSON (${(err as Error).message})`);
  }
  const parsed = schema.safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new InputError(`${file}: ${issue?.path.join(".") ?? ""}: ${issue?.message ?? "invalid"}`);
  }
  return parsed.data;
}

export function readModelHints(dir: string): { chatTemplate: string; specialTokens: string[] } {
  const config = readJson(path.join(dir, "tokenizer_config.json"), TokenizerConfig);
  const tokenizer = readJson(path.join(dir, "tokenizer.json"), TokenizerJson);
  if (config === undefined && tokenizer === undefined) {
    throw new InputError(`${dir}: no tokenizer_config.json or tokenizer.json`, {
      hint: "--model must be a Hugging Face model folder",
    });
  }
  let chatTemplate = "";
  const raw = config?.chat_template;
  if (typeof raw === "string") chatTemplate = raw;
  else if (Array.isArray(raw)) chatTemplate = raw.map((t) => t.template).join("\n");
  const jinja = path.join(dir, "chat_template.jinja");
  if (chatTemplate === "" && existsSync(jinja)) chatTemplate = readFileSync(jinja, "utf8");
  return { chatTemplate, specialTokens: (tokenizer?.added_tokens ?? []).map((t) => t.content) };
}
