/**
 * Python agent functions (`function: agent.py#name`) run in `python -m agentrl_worker.openai_agent_host`: a host
 * imports the function and `openai` once and runs it for many trajectories at once, each an asyncio task with its own
 * client (worker/agentrl_worker/openai_agent_host.py), so a step of a hundred trajectories pays one interpreter
 * start-up per host, not a hundred; `workers` of them share the trajectories. A host runs like the Python agent loop
 * host (the same launch, sandbox and restart on death).
 */
import { availableParallelism } from "node:os";
import { z } from "zod";
import { InputError } from "../errors.js";
import { HostPool, type HostHello, type Launch } from "../process/index.js";
import { startPythonHost, toolHostConfigSchema } from "../tools/index.js";
import type { OpenaiAgentSpec } from "../rollout/config.js";
import type { AgentProcessOutcome } from "./agent-process.js";
import { RunHostProcess } from "./run-host.js";

const replySchema = z.object({ id: z.number().int(), ok: z.boolean(), result: z.unknown().optional(), kind: z.string().optional(), error: z.string().optional() });
type Reply = z.infer<typeof replySchema>;

class FunctionHostProcess extends RunHostProcess<Reply> {
  /** Runs the function for one trajectory; cancels it in the host at the deadline. */
  async run(baseUrl: string, apiKey: string, row: unknown, signal: AbortSignal): Promise<AgentProcessOutcome> {
    const reply = await this.runRequest({ base_url: baseUrl, api_key: apiKey, row }, signal);
    if ("lost" in reply) return { ok: false, error: reply.lost };
    if (reply.ok) return { ok: true, lastLine: reply.result == null ? undefined : JSON.stringify(reply.result) };
    return { ok: false, error: reply.kind === "cancelled" ? "cancelled at the trajectory's deadline" : `raised ${reply.error ?? "an error"}` };
  }
}

/**
 * The hosts of one function agent (`workers`, default defaultAgentWorkers()): started at load (a function that cannot
 * load stops the run, exit 2), each restarted when it dies, each trajectory run by the host with the fewest running:
 * one process runs its agents' Python on one core, however many it holds at once.
 */
export class PythonAgentHost {
  private readonly pool: HostPool<FunctionHostProcess>;

  private constructor(
    private readonly name: string,
    private readonly target: string,
    private readonly spec: OpenaiAgentSpec,
    private readonly where: string,
    private readonly paths: readonly string[],
  ) {
    const count = spec.workers ?? defaultAgentWorkers();
    const labelOf = (index: number) => `the Python agent host${count > 1 ? ` ${index + 1} of ${count}` : ""} of ${name}`;
    this.pool = new HostPool(count, labelOf, (onDead) => this.start(onDead));
  }

  static async load(name: string, target: string, spec: OpenaiAgentSpec, where: string, paths: readonly string[]): Promise<PythonAgentHost> {
    const host = new PythonAgentHost(name, target, spec, where, paths);
    await host.pool.load();
    return host;
  }

  run(baseUrl: string, apiKey: string, row: unknown, signal: AbortSignal): Promise<AgentProcessOutcome> {
    // A host that died and cannot start again fails this trajectory with why.
    return this.pool.run((host) => host.run(baseUrl, apiKey, row, signal), (reason) => ({ ok: false, error: reason.message }));
  }

  private start(onDead: () => void): Promise<FunctionHostProcess> {
    // The gateway is on loopback: a sandboxed host shares the network namespace to reach it.
    const host = toolHostConfigSchema.parse({ python: this.spec.python, sandbox: this.spec.sandbox, allow_network: true, memory_limit_mb: null, max_file_size_mb: null });
    const label = `the Python agent host of ${this.name}`;
    return startPythonHost(
      { module: "openai_agent_host", args: ["--function", this.target], paths: this.paths, host },
      (launch: Launch) => new FunctionHostProcess(launch, { label, stderrPrefix: `agent ${this.name}` }, onDead, "the Python agent host", replySchema),
      label,
      (python: string, hello: HostHello, stderr: string) =>
        new InputError(`${this.where}: cannot start ${this.target} with ${python}: ${[hello.error, stderr].filter(Boolean).join(": ")}${(hello["classes"] as string[] | undefined)?.length ? `; it defines: ${(hello["classes"] as string[]).join(", ")}` : ""}`, {
          hint: "name a function of (client, row) in the file: def agent(client, row) or async def agent(client, row)",
        }),
    );
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/** Hosts per Python function agent unless `workers` says: one per 4 cores (one on a laptop), at most 8. */
export function defaultAgentWorkers(cores = availableParallelism()): number {
  return Math.min(8, Math.max(1, Math.floor(cores / 4)));
}
