/**
 * The CPU demo's tool (docs/cpu-demo.md): `open_vault` takes no arguments and answers with the code of the row's vault,
 * which it gets from the row's `tools_kwargs.open_vault.create_kwargs.code` (verl passes create_kwargs to `create`).
 * Its step reward is 1.0 when it revealed a code: the built-in `agentrl/vault` reward uses that as proof that a real
 * call ran, since text the model writes can imitate a tool response but cannot produce a step reward.
 */
import { randomUUID } from "node:crypto";
import { BaseTool } from "./base-tool.js";
import type { ToolContext, ToolExecuteResult, ToolResponse } from "./types.js";

export class VaultTool extends BaseTool {
  private readonly codes = new Map<string, string | null>();

  override async create(instanceId: string | undefined, kwargs: Record<string, unknown>): Promise<{ instanceId: string; response: ToolResponse }> {
    const id = instanceId ?? randomUUID();
    const createKwargs = kwargs["create_kwargs"];
    const code = createKwargs && typeof createKwargs === "object" ? (createKwargs as Record<string, unknown>)["code"] : kwargs["code"];
    this.codes.set(id, typeof code === "string" || typeof code === "number" ? String(code) : null);
    return { instanceId: id, response: {} };
  }

  override async execute(instanceId: string, _parameters: Record<string, unknown>, _ctx: ToolContext): Promise<ToolExecuteResult> {
    const code = this.codes.get(instanceId);
    // A row without a code is a dataset problem, reported to the model as the tool's answer (an expected outcome).
    if (code === undefined || code === null) return { response: { text: "no vault" }, reward: 0.0, metrics: {} };
    return { response: { text: code }, reward: 1.0, metrics: {} };
  }

  override async release(instanceId: string): Promise<void> {
    this.codes.delete(instanceId);
  }
}
