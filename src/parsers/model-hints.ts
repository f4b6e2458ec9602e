/**
 * What `auto` needs from a Hugging Face model folder, read without loading a tokenizer: the chat template
 * (tokenizer_config.json `chat_template`, or chat_template.jinja) and the added tokens (tokenizer.json).
 */
import path from "node:path";
import { z } from "zod";
import { InputError } from "../errors.js";
import { formatIssues } from "../zod-issues.js";
import { readTextFile } from "../data/text-file.js";

const TokenizerConfig = z.looseObject({
  chat_template: z
    .union([z.string(), z.array(z.looseObject({ name: z.string(), template: z.string() }))])
    .optional(),
});
const TokenizerJson = z.looseObject({
  added_tokens: z.array(z.looseObject({ content: z.string() })).optional(),
});

async function readJson<T>(file: string, schema: z.ZodType<T>): Promise<T | undefined> {
  const text = await readTextFile(file, { optional: true });
  if (text === undefined) return undefined;
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (err) {
    throw new InputError(`${file}: not valid JSON (${(err as Error).message})`);
  }
  const parsed = schema.safeParse(data);
  if (!parsed.success) {
    throw new InputError(`${file}: ${formatIssues(parsed.error, { only: "first" })}`);
  }
  return parsed.data;
}

export async function readModelHints(dir: string): Promise<{ chatTemplate: string; specialTokens: string[] }> {
  const config = await readJson(path.join(dir, "tokenizer_config.json"), TokenizerConfig);
  const tokenizer = await readJson(path.join(dir, "tokenizer.json"), TokenizerJson);
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
  if (chatTemplate === "") chatTemplate = (await readTextFile(jinja, { optional: true })) ?? "";
  return { chatTemplate, specialTokens: (tokenizer?.added_tokens ?? []).map((t) => t.content) };
}
