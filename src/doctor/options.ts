/**
 * Resolves the doctor's options from flags and, when given, a rollout/train config (verl key names): flags win over
 * the config, the config over the defaults of src/rollout/config.ts. Only the keys the doctor reads are validated,
 * so the same file works for `agentrl rollout` and `agentrl train`.
 */
import { parseTemplateKwargs } from "../chat/template-command.js";
import { z } from "zod";
import { InputError, UsageError } from "../errors.js";
import { formatIssues } from "../zod-issues.js";
import { resolveModelPath } from "../config/hub-model.js";
import { getPath, readYamlConfig } from "../config/tree.js";
import type { DoctorOptions } from "./types.js";

export interface DoctorFlags {
  model?: string;
  server?: string;
  tools?: string;
  format?: string;
  config?: string;
  maxPromptLength?: number;
  maxResponseLength?: number;
  apiKey?: string;
  kwargs?: string;
  timeout?: number;
  json?: boolean;
  loraRank?: number;
}

/** src/rollout/config.ts's defaults for data.max_prompt_length and data.max_response_length. */
const DEFAULT_BUDGET = 1024;

const KEYS = {
  model: ["actor_rollout_ref.model.path", z.string().min(1).nullable()],
  server: ["actor_rollout_ref.rollout.server.urls", z.array(z.string()).nullable()],
  tools: ["actor_rollout_ref.rollout.multi_turn.tool_config_path", z.string().nullable()],
  format: ["actor_rollout_ref.rollout.multi_turn.format", z.string()],
  apiKeyEnv: ["actor_rollout_ref.rollout.server.api_key_env", z.string()],
  maxPromptLength: ["data.max_prompt_length", z.number().int().positive()],
  maxResponseLength: ["data.max_response_length", z.number().int().positive()],
  loraRank: ["actor_rollout_ref.model.lora_rank", z.number().int().nonnegative()],
  loraMerge: ["actor_rollout_ref.model.lora.merge", z.boolean()],
} as const;

type ConfigValues = { [K in keyof typeof KEYS]?: z.infer<(typeof KEYS)[K][1]> };

async function readConfigValues(file: string): Promise<ConfigValues> {
  const tree = await readYamlConfig(file);
  const values: Record<string, unknown> = {};
  for (const [name, [key, schema]] of Object.entries(KEYS)) {
    const raw = getPath(tree, key);
    if (raw === undefined) continue;
    const parsed = (schema as z.ZodType).safeParse(raw);
    if (!parsed.success) throw new InputError(`${file}: ${formatIssues(parsed.error, { only: "first", at: key })}`);
    if (parsed.data !== null) values[name] = parsed.data;
  }
  return values as ConfigValues;
}

/** The rank the server must take adapters of: a LoRA run without lora.merge (--lora-rank, or the config's). */
function loraCheck(rank: number | undefined): { loraRank?: number } {
  return rank ? { loraRank: rank } : {};
}

export async function resolveDoctorOptions(flags: DoctorFlags, env: NodeJS.ProcessEnv = process.env): Promise<DoctorOptions> {
  const config = flags.config ? await readConfigValues(flags.config) : {};
  const spec = flags.model ?? config.model;
  if (!spec) throw new UsageError("doctor needs the local model folder", { hint: "pass --model DIR (or actor_rollout_ref.model.path in --config)" });
  const model = await resolveModelPath(spec, flags.model ? "--model" : "actor_rollout_ref.model.path");
  const server = flags.server ?? config.server?.[0];
  if (!server) {
    throw new UsageError("doctor needs a server to check", { hint: "pass --server URL (or actor_rollout_ref.rollout.server.urls in --config)" });
  }
  if (!/^https?:\/\/[^/]+/.test(server)) throw new UsageError(`--server must be an http(s) URL, got '${server}'`);
  const apiKey = flags.apiKey ?? env[config.apiKeyEnv ?? "SGLANG_API_KEY"] ?? undefined;
  const promptFromFlag = flags.maxPromptLength !== undefined || flags.maxResponseLength !== undefined;
  const promptFromConfig = config.maxPromptLength !== undefined || config.maxResponseLength !== undefined;
  const kwargs = parseTemplateKwargs(flags.kwargs);
  const tools = flags.tools ?? config.tools;
  return {
    model,
    server: server.replace(/\/+$/, ""),
    ...(apiKey ? { apiKey } : {}),
    ...(tools ? { toolsFile: tools } : {}),
    format: flags.format ?? config.format ?? "auto",
    maxPromptLength: flags.maxPromptLength ?? config.maxPromptLength ?? DEFAULT_BUDGET,
    maxResponseLength: flags.maxResponseLength ?? config.maxResponseLength ?? DEFAULT_BUDGET,
    budgetSource: promptFromFlag ? "flags" : promptFromConfig ? `from ${flags.config}` : "defaults",
    ...(kwargs ? { templateKwargs: kwargs } : {}),
    ...(flags.timeout !== undefined ? { requestTimeoutMs: flags.timeout * 1000 } : {}),
    ...loraCheck(flags.loraRank ?? (config.loraMerge ? 0 : config.loraRank)),
  };
}
