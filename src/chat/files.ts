/**
 * Reads the files of a Hugging Face model folder that the chat layer needs: tokenizer.json, tokenizer_config.json
 * (chat template, special tokens), generation_config.json when present. Every file is validated with zod, and every
 * error names the file and the field, because a broken model folder is input the user must fix.
 */
import path from "node:path";
import { z } from "zod";
import { readJsonFile } from "../data/json-file.js";
import { readTextFile } from "../data/text-file.js";
import { InputError } from "../errors.js";
import { formatIssues } from "../zod-issues.js";

/** A special token as tokenizer_config.json spells it: a plain string, or an AddedToken dict with `content`. */
const tokenSpelling = z.union([z.string(), z.looseObject({ content: z.string() })]).nullish();

const addedTokenEntry = z.looseObject({
  content: z.string(),
  special: z.boolean().optional(),
});

/** `chat_template` is a string, or a list of named templates (the one named "default" is the chat template). */
const chatTemplateField = z.union([
  z.string(),
  z.array(z.looseObject({ name: z.string(), template: z.string() })),
]);

export const tokenizerConfigSchema = z.looseObject({
  chat_template: chatTemplateField.optional(),
  bos_token: tokenSpelling,
  eos_token: tokenSpelling,
  pad_token: tokenSpelling,
  unk_token: tokenSpelling,
  added_tokens_decoder: z.record(z.string().regex(/^\d+$/, "keys must be token ids"), addedTokenEntry).optional(),
  clean_up_tokenization_spaces: z.boolean().optional(),
});
export type TokenizerConfig = z.infer<typeof tokenizerConfigSchema>;

/** Only the parts of tokenizer.json this layer reads itself; the tokenizer library validates the rest. */
export const tokenizerJsonSchema = z.looseObject({
  model: z.looseObject({ type: z.string().optional() }),
  added_tokens: z
    .array(z.looseObject({ id: z.number().int().nonnegative(), content: z.string(), special: z.boolean().optional() }))
    .default([]),
});
export type TokenizerJson = z.infer<typeof tokenizerJsonSchema>;

export const generationConfigSchema = z.looseObject({
  eos_token_id: z.union([z.number().int().nonnegative(), z.array(z.number().int().nonnegative())]).nullish(),
  bos_token_id: z.number().int().nonnegative().nullish(),
});
export type GenerationConfig = z.infer<typeof generationConfigSchema>;

/** config.json, for the one field the chat layer needs: the embedding's rows (vocab_size), often past the tokenizer's ids. */
export const modelConfigSchema = z.looseObject({ vocab_size: z.number().int().positive().nullish() });

export interface ModelFiles {
  dir: string;
  tokenizerJson: TokenizerJson;
  tokenizerConfig: TokenizerConfig;
  generationConfig: GenerationConfig | undefined;
  /** The chat template source, from tokenizer_config.json or a separate chat_template.jinja / chat_template.json. */
  chatTemplate: string;
  /** Which file the template came from, for error messages. */
  chatTemplateFile: string;
  /** config.json's vocab_size (the embedding's rows), when the folder has a config.json that says it. */
  embeddingRows: number | undefined;
}

const MODEL_FOLDER_HINT = "--model must be a Hugging Face model folder holding tokenizer.json and tokenizer_config.json";

function readJson(file: string, required: boolean): Promise<unknown> {
  return readJsonFile(file, { optional: !required, hint: MODEL_FOLDER_HINT });
}

function validate<T>(schema: z.ZodType<T>, value: unknown, file: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new InputError(`${file}: ${formatIssues(parsed.error)}`);
  return parsed.data;
}

/** Picks the chat template: tokenizer_config.json first, then chat_template.jinja, then chat_template.json. */
async function findChatTemplate(dir: string, config: TokenizerConfig): Promise<{ source: string; file: string }> {
  const configFile = path.join(dir, "tokenizer_config.json");
  const field = config.chat_template;
  if (typeof field === "string") return { source: field, file: configFile };
  if (Array.isArray(field)) {
    const named = field.find((entry) => entry.name === "default");
    if (!named) throw new InputError(`${configFile}: chat_template is a list with no template named "default"`);
    return { source: named.template, file: configFile };
  }
  const jinjaFile = path.join(dir, "chat_template.jinja");
  const jinja = await readTextFile(jinjaFile, { optional: true });
  if (jinja !== undefined) return { source: jinja, file: jinjaFile };
  const jsonFile = path.join(dir, "chat_template.json");
  const raw = await readJson(jsonFile, false);
  if (raw !== undefined) {
    const parsed = validate(z.looseObject({ chat_template: z.string() }), raw, jsonFile);
    return { source: parsed.chat_template, file: jsonFile };
  }
  throw new InputError(`${configFile}: chat_template: missing, and there is no chat_template.jinja or chat_template.json`, {
    hint: "use an instruct/chat model folder; base models usually ship without a chat template",
  });
}

/** A chat template given in place of the model folder's (verl's custom_chat_template): its text, and where it came from. */
export interface ChatTemplateSource {
  source: string;
  file: string;
}

/**
 * verl's `custom_chat_template` (the template's text) or `custom_chat_template_file` (a file holding it), under
 * `prefix` (`actor_rollout_ref.model`); undefined when neither is set.
 */
export async function customChatTemplate(keys: { custom_chat_template: string | null; custom_chat_template_file: string | null }, prefix: string): Promise<ChatTemplateSource | undefined> {
  if (keys.custom_chat_template !== null && keys.custom_chat_template_file !== null) {
    throw new InputError(`${prefix}.custom_chat_template and ${prefix}.custom_chat_template_file are both set: give one`);
  }
  if (keys.custom_chat_template !== null) return { source: keys.custom_chat_template, file: `${prefix}.custom_chat_template` };
  if (keys.custom_chat_template_file === null) return undefined;
  const file = keys.custom_chat_template_file;
  return { source: await readTextFile(file, { hint: `${prefix}.custom_chat_template_file names a Jinja chat template file` }), file };
}

/** `chatTemplate` replaces the folder's own template (which then need not exist). */
export async function readModelFiles(dir: string, chatTemplate?: ChatTemplateSource): Promise<ModelFiles> {
  const tokenizerFile = path.join(dir, "tokenizer.json");
  const configFile = path.join(dir, "tokenizer_config.json");
  const generationFile = path.join(dir, "generation_config.json");
  const tokenizerJson = validate(tokenizerJsonSchema, await readJson(tokenizerFile, true), tokenizerFile);
  const tokenizerConfig = validate(tokenizerConfigSchema, await readJson(configFile, true), configFile);
  const generationRaw = await readJson(generationFile, false);
  const generationConfig =
    generationRaw === undefined ? undefined : validate(generationConfigSchema, generationRaw, generationFile);
  const template = chatTemplate ?? (await findChatTemplate(dir, tokenizerConfig));
  const modelConfigFile = path.join(dir, "config.json");
  const modelConfigRaw = await readJson(modelConfigFile, false);
  const embeddingRows = modelConfigRaw === undefined ? undefined : validate(modelConfigSchema, modelConfigRaw, modelConfigFile).vocab_size ?? undefined;
  return {
    embeddingRows,
    dir,
    tokenizerJson,
    tokenizerConfig,
    generationConfig,
    chatTemplate: template.source,
    chatTemplateFile: template.file,
  };
}

/** The text of a special token field, whichever of its two spellings the file uses. */
export function tokenText(value: z.infer<typeof tokenSpelling>): string | undefined {
  if (value === null || value === undefined) return undefined;
  return typeof value === "string" ? value : value.content;
}
