/** verl's BaseTool defaults, for built-ins and user tools to extend. */
import { randomUUID } from "node:crypto";
import type { OpenAIFunctionToolSchema } from "./schema.js";
import type { Tool, ToolContext, ToolExecuteResult, ToolResponse } from "./types.js";

export class BaseTool implements Tool {
  readonly name: string;

  constructor(
    readonly config: Record<string, unknown>,
    readonly schema: OpenAIFunctionToolSchema,
  ) {
    this.name = schema.function.name;
  }

  async create(instanceId: string | undefined, _kwargs: Record<string, unknown>): Promise<{ instanceId: string; response: ToolResponse }> {
    return { instanceId: instanceId ?? randomUUID(), response: {} };
  }

  async execute(_instanceId: string, _parameters: Record<string, unknown>, _ctx: ToolContext): Promise<ToolExecuteResult> {
    return { response: { text: "Updated the tool state." }, reward: 0.0, metrics: {} };
  }

  async calcReward(_instanceId: string, _kwargs?: Record<string, unknown>): Promise<number> {
    return 0.0;
  }

  async release(_instanceId: string, _kwargs?: Record<string, unknown>): Promise<void> {}
}
