/**
 * The OpenAI-API agents of one agent-loop registry: the gateway they share (started with the first of them), the
 * launcher of their commands, and the run's once-only notes. src/rollout/agent-loops.ts imports this module only
 * when a config registers such an agent, so no other run loads the gateway.
 */
import type { SelectedAgentLoop } from "../rollout/agent-loop.js";
import type { OpenaiAgentSpec } from "../rollout/config.js";
import { AgentLauncher } from "./agent-launcher.js";
import { openaiAgentLoop } from "./openai-agent.js";
import { Gateway } from "./server.js";

export class OpenaiAgents {
  private gateway: Gateway | undefined;
  // Started by the first command agent: one process starts them all.
  private readonly launcher = new AgentLauncher();
  private readonly loops: Array<{ close(): Promise<void> }> = [];
  private readonly noted = new Set<string>();

  constructor(
    private readonly modelName: string,
    private readonly cwd: string,
  ) {}

  /** The agent registered as `name`, loaded now so that a bad one fails before any rollout. */
  async add(name: string, spec: OpenaiAgentSpec): Promise<SelectedAgentLoop> {
    this.gateway ??= await Gateway.start(this.modelName);
    const where = `actor_rollout_ref.rollout.agent.agent_loops.${name}`;
    const loop = await openaiAgentLoop({ name, spec, gateway: this.gateway, launcher: this.launcher, where, cwd: this.cwd, note: this.note });
    this.loops.push(loop);
    return loop.selected;
  }

  /** Once per run: the same note from every trajectory would bury everything else. */
  private readonly note = (key: string, message: string): void => {
    if (this.noted.has(key)) return;
    this.noted.add(key);
    process.stderr.write(`note: ${message}\n`);
  };

  async close(): Promise<void> {
    await Promise.all([...this.loops.map((loop) => loop.close()), this.launcher.close(), this.gateway?.stop()]);
  }
}
