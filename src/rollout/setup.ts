/**
 * Builds what a rollout needs from a validated config: the chat model, the SGLang client, the function-call parser,
 * tools, interactions and the reward function. Shared by `agentrl rollout` and `agentrl train`.
 */
import path from "node:path";
import { ChatModel, freezeTemplateValue } from "../chat/index.js";
import { readModelFiles, type ChatTemplateSource } from "../chat/files.js";
import { SglangClient, type ServerLoads } from "../engine/index.js";
import { getParser, type FunctionCallParser } from "../parsers/index.js";
import { loadToolRegistry, type ToolRegistry } from "../tools/index.js";
import { loadInteractionRegistry, type InteractionRegistry } from "../interactions/index.js";
import { DEFAULT_REWARD_NAME, loadRewardModule, type LoadedRewardFunction, type OverlongBuffer, type PythonRewardOptions } from "../rewards/index.js";
import { UsageError } from "../errors.js";
import { readTextFile } from "../data/text-file.js";
import type { RolloutSection } from "./config.js";
import type { TrajectoryContext } from "./run-trajectory.js";
import { AgentLoopRegistry } from "./agent-loops.js";

export interface RolloutParts {
  model: ChatModel;
  parser: FunctionCallParser;
  tools: ToolRegistry | undefined;
  toolSchemas: Record<string, unknown>[];
  interactions: InteractionRegistry | undefined;
  rewardFunction: LoadedRewardFunction | undefined;
  /** custom_reward_function.reward_kwargs, passed to every reward call. */
  rewardKwargs: Record<string, unknown>;
  /** reward_model.overlong_buffer when enabled. */
  overlongBuffer?: OverlongBuffer;
  /** The agent loops of actor_rollout_ref.rollout.agent, modules imported. */
  agentLoops: AgentLoopRegistry;
  close(): Promise<void>;
}

/** Loads the model's tokenizer and template, the parser, tools, interactions and reward module (no server needed). */
export async function loadRolloutParts(options: {
  modelPath: string;
  rollout: RolloutSection;
  rewardModulePath: string | null;
  /** custom_reward_function.name: the reward module's function (default compute_score). */
  rewardName?: string;
  rewardKwargs?: Record<string, unknown>;
  overlongBuffer?: OverlongBuffer;
  /** custom_reward_function.python: how a .py reward file runs. */
  rewardPython?: PythonRewardOptions;
  /** Folders that tool and interaction `class_name` module paths may load from. */
  moduleDirs?: string[];
  /** data.apply_chat_template_kwargs: template variables of every render. */
  templateKwargs?: Record<string, unknown>;
  /** actor_rollout_ref.model.custom_chat_template(_file): the template in place of the model folder's. */
  chatTemplate?: ChatTemplateSource;
}): Promise<RolloutParts> {
  // One read of the model folder for both: tokenizer.json alone is megabytes of JSON to parse.
  const files = await readModelFiles(options.modelPath, options.chatTemplate);
  const model = new ChatModel(files, { templateKwargs: options.templateKwargs ?? {} });
  const parser = getParser(options.rollout.multi_turn.format, {
    chatTemplate: files.chatTemplate,
    specialTokens: files.tokenizerJson.added_tokens.map((t) => t.content),
  });
  const multiTurn = options.rollout.multi_turn;
  const moduleDirs = options.moduleDirs ?? [];
  const tools = multiTurn.tool_config_path
    ? await loadToolRegistry(multiTurn.tool_config_path, { moduleDirs: [path.dirname(path.resolve(multiTurn.tool_config_path)), ...moduleDirs] })
    : undefined;
  let interactions: InteractionRegistry | undefined;
  try {
    interactions = multiTurn.interaction_config_path
      ? await loadInteractionRegistry(multiTurn.interaction_config_path, {
          moduleDirs: [path.dirname(path.resolve(multiTurn.interaction_config_path)), ...moduleDirs],
        })
      : undefined;
  } catch (err) {
    await tools?.close();
    throw err;
  }
  let rewardFunction: LoadedRewardFunction | undefined;
  let agentLoops: AgentLoopRegistry | undefined;
  try {
    agentLoops = await AgentLoopRegistry.load(options.rollout.agent, process.cwd(), path.basename(path.resolve(options.modelPath)));
    rewardFunction = options.rewardModulePath
      ? await loadRewardModule(options.rewardModulePath, options.rewardName ?? DEFAULT_REWARD_NAME, process.cwd(), options.rewardPython)
      : undefined;
  } catch (err) {
    await Promise.all([tools?.close(), agentLoops?.close()]);
    throw err;
  }
  return {
    model,
    parser,
    tools,
    // Frozen: the template prints them into every prompt and drift check, and prints frozen values once.
    toolSchemas: freezeTemplateValue(tools?.schemas() ?? []),
    interactions,
    rewardFunction,
    rewardKwargs: options.rewardKwargs ?? {},
    ...(options.overlongBuffer?.enable ? { overlongBuffer: options.overlongBuffer } : {}),
    agentLoops,
    async close() {
      await Promise.all([tools?.close(), rewardFunction?.close?.(), agentLoops.close()]);
    },
  };
}

/** The API key: from the environment variable the config names, or a file given by <NAME>_FILE. Never logged. */
export async function readApiKey(envName: string): Promise<string | undefined> {
  const direct = process.env[envName];
  if (direct) return direct.trim();
  const file = process.env[`${envName}_FILE`];
  if (file) return (await readTextFile(file)).trim();
  return undefined;
}

/** `concurrency`: the client's request slots and connections; a rollout worker thread gets its share. */
export function makeClient(
  rollout: RolloutSection,
  apiKey: string | undefined,
  concurrency: number = rollout.max_concurrency,
  serverLoads?: ServerLoads,
): SglangClient {
  const server = rollout.server;
  if (server.urls.length === 0) {
    throw new UsageError("no inference server given", {
      hint: "pass --server URL (repeat for several), set actor_rollout_ref.rollout.server.urls, or use --engine embedded",
    });
  }
  return new SglangClient({
    servers: server.urls,
    ...(server.worker_urls ? { workers: server.worker_urls } : {}),
    ...(apiKey ? { apiKey } : {}),
    concurrency,
    connectTimeoutMs: server.connect_timeout * 1000,
    requestTimeoutMs: server.timeout * 1000,
    adminTimeoutMs: server.admin_timeout * 1000,
    maxRetries: server.max_attempts - 1,
    retryBaseDelayMs: server.retry_delay * 1000,
    adaptiveConcurrency: server.adaptive_concurrency,
    ...(serverLoads ? { serverLoads } : {}),
  });
}

/** The context every trajectory runs in, from the loaded parts, a client and the length budgets. */
export function trajectoryContext(
  parts: RolloutParts,
  client: SglangClient,
  rollout: RolloutSection,
  lengths: { maxPromptLength: number; maxResponseLength: number },
  step: number | null = null,
): Omit<TrajectoryContext, "signal"> {
  return {
    model: parts.model,
    client,
    parser: parts.parser,
    tools: parts.tools,
    toolSchemas: parts.toolSchemas,
    interactions: parts.interactions,
    rewardFunction: parts.rewardFunction,
    rewardKwargs: parts.rewardKwargs,
    overlongBuffer: parts.overlongBuffer,
    agentLoops: parts.agentLoops,
    rollout,
    maxPromptLength: lengths.maxPromptLength,
    maxResponseLength: lengths.maxResponseLength,
    step,
  };
}
