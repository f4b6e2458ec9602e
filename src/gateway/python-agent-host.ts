/**
 * Python agent functions (`function: agent.py#name`) run in `python -m agentrl_worker.openai_agent_host`: one process
 * imports the function and `openai` once and runs it for every trajectory as an asyncio task with its own client
 * (worker/agentrl_worker/openai_agent_host.py), so a step of a hundred trajectories pays one interpreter start-up,
 * not a hundred. The host runs like the Python agent loop host (the same launch, sandbox and restart on death).
 */
import { z } from "zod";
import { InputError } from "../errors.js";
import { PythonHostProcess, type HostHello, type Launch } from "../process/index.js";
import { startPythonHost, toolHostConfigSchema } from "../tools/index.js";
import type { OpenaiAgentSpec } from "../rollout/config.js";
import type { AgentProcessOutcome } from "./agent-process.js";

const replySchema = z.object({ id: z.number().int(), ok: z.boolean(), result: z.unknown().optional(), kind: z.string().optional(), error: z.string().optional() });

interface Waiting {
  resolve(outcome: AgentProcessOutcome): void;
}

class FunctionHostProcess extends PythonHostProcess {
  private readonly waiting = new Map<number, Waiting>();
  private nextId = 1;

  /** Runs the function for one trajectory; cancels it in the host at the deadline. */
  run(baseUrl: string, apiKey: string, row: unknown, signal: AbortSignal): Promise<AgentProcessOutcome> {
    if (!this.alive) return Promise.resolve({ ok: false, error: "the Python agent host is not running" });
    const id = this.nextId++;
    return new Promise((resolve) => {
      const onAbort = () => this.process.send({ op: "cancel", target: id });
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiting.set(id, {
        resolve: (outcome) => {
          signal.removeEventListener("abort", onAbort);
          resolve(outcome);
        },
      });
      this.process.send({ id, op: "run", base_url: baseUrl, api_key: apiKey, row });
    });
  }

  protected received(raw: unknown): void {
    const parsed = replySchema.safeParse(raw);
    if (!parsed.success) return; // not a reply of this protocol: nothing waits on it
    const reply = parsed.data;
    const waiting = this.waiting.get(reply.id);
    if (!waiting) return;
    this.waiting.delete(reply.id);
    if (reply.ok) waiting.resolve({ ok: true, lastLine: reply.result == null ? undefined : JSON.stringify(reply.result) });
    else waiting.resolve({ ok: false, error: reply.kind === "cancelled" ? "cancelled at the trajectory's deadline" : `raised ${reply.error ?? "an error"}` });
  }

  protected died(): void {
    const last = this.lastStderr();
    for (const waiting of this.waiting.values()) {
      waiting.resolve({ ok: false, error: `the Python agent host exited (${this.process.exitText})${last ? `: ${last}` : ""}; it is restarted for later trajectories` });
    }
    this.waiting.clear();
  }
}

/** One host per function agent, started at load (a function that cannot load stops the run, exit 2), restarted when it dies. */
export class PythonAgentHost {
  private host: Promise<FunctionHostProcess>;
  private closed = false;

  private constructor(
    private readonly name: string,
    private readonly target: string,
    private readonly spec: OpenaiAgentSpec,
    private readonly where: string,
    private readonly paths: readonly string[],
  ) {
    this.host = this.start();
  }

  static async load(name: string, target: string, spec: OpenaiAgentSpec, where: string, paths: readonly string[]): Promise<PythonAgentHost> {
    const host = new PythonAgentHost(name, target, spec, where, paths);
    await host.host;
    return host;
  }

  async run(baseUrl: string, apiKey: string, row: unknown, signal: AbortSignal): Promise<AgentProcessOutcome> {
    let host: FunctionHostProcess;
    try {
      host = await this.host;
    } catch (err) {
      return { ok: false, error: (err as Error).message };
    }
    return host.run(baseUrl, apiKey, row, signal);
  }

  private start(): Promise<FunctionHostProcess> {
    // The gateway is on loopback: a sandboxed host shares the network namespace to reach it.
    const host = toolHostConfigSchema.parse({ python: this.spec.python, sandbox: this.spec.sandbox, allow_network: true, memory_limit_mb: null, max_file_size_mb: null });
    return startPythonHost(
      { module: "openai_agent_host", args: ["--function", this.target], paths: this.paths, host },
      (launch: Launch) => new FunctionHostProcess(launch, { label: `the Python agent host of ${this.name}`, stderrPrefix: `agent ${this.name}` }, () => this.restart()),
      `the Python agent host of ${this.name}`,
      (python: string, hello: HostHello, stderr: string) =>
        new InputError(`${this.where}: cannot start ${this.target} with ${python}: ${[hello.error, stderr].filter(Boolean).join(": ")}${(hello["classes"] as string[] | undefined)?.length ? `; it defines: ${(hello["classes"] as string[]).join(", ")}` : ""}`, {
          hint: "name a function of (client, row) in the file: def agent(client, row) or async def agent(client, row)",
        }),
    );
  }

  private restart(): void {
    if (this.closed) return;
    process.stderr.write(`warning: the Python agent host of ${this.name} exited; starting it again\n`);
    this.host = this.start();
    this.host.catch(() => undefined); // the next trajectory fails with the reason
  }

  async close(): Promise<void> {
    this.closed = true;
    const host = await this.host.catch(() => undefined);
    await host?.close();
  }
}
