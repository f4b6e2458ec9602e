/**
 * The tool lifecycle of verl's BaseTool (verl/tools/base_tool.py): create → execute (text, step reward,
 * metrics) → calcReward → release. With `multi_turn.tool_lifetime: trajectory` (the default, verl's SGLang rollout)
 * one instance lives for the whole trajectory; with `call` (verl's agent loop) every call runs on a fresh instance.
 */
import type { OpenAIFunctionToolSchema } from "./schema.js";

/** verl's ToolResponse: text plus optional media lists. */
export interface ToolResponse {
  text?: string;
  image?: unknown[];
  video?: unknown[];
}

export interface ToolExecuteResult {
  response: ToolResponse;
  /** The step reward; null where verl's tool returns None (e.g. SandboxFusionTool). */
  reward: number | null;
  metrics: Record<string, unknown>;
}

/** What a tool can know about the trajectory that calls it (verl's `agent_data`). */
export interface ToolAgentData {
  /** The trajectory's key, `<data_index>:<sample_index>`. */
  trajectoryId: string;
  /** The assistant turn (0-based) that made the call. */
  turn: number;
  /** The conversation so far, the call's assistant message included. */
  messages: readonly unknown[];
}

/** Passed to `execute`: lets a tool stop work when the runner gives up on it. */
export interface ToolContext {
  /** Aborted when the call times out or the trajectory is cancelled. */
  signal: AbortSignal;
  /** `execute_kwargs` from the sample's tools_kwargs (`{}` when none). */
  kwargs?: Record<string, unknown>;
  /** The calling trajectory, when the call comes from a rollout. */
  agentData?: ToolAgentData;
}

export interface Tool {
  /** `tool_schema.function.name`; the name the model calls. */
  readonly name: string;
  readonly schema: OpenAIFunctionToolSchema;
  /** The whole `config` block of the YAML entry. */
  readonly config: Record<string, unknown>;
  create(instanceId: string | undefined, kwargs: Record<string, unknown>): Promise<{ instanceId: string; response: ToolResponse }>;
  execute(instanceId: string, parameters: Record<string, unknown>, ctx: ToolContext): Promise<ToolExecuteResult>;
  /** `kwargs`: calc_reward_kwargs from the sample's tools_kwargs. */
  calcReward(instanceId: string, kwargs?: Record<string, unknown>): Promise<number>;
  /** `kwargs`: release_kwargs from the sample's tools_kwargs. */
  release(instanceId: string, kwargs?: Record<string, unknown>): Promise<void>;
  /** Frees shared resources (MCP connections); called once when the registry closes. */
  close?(): Promise<void>;
}

/** What a tool class exported from a user module is constructed with (verl: `tool_cls(config, tool_schema)`). */
export type ToolClass = new (config: Record<string, unknown>, toolSchema: OpenAIFunctionToolSchema) => Tool;
