/**
 * The agent loops a rollout knows, by name: the built-ins (tool_agent, single_turn_agent) and the user's JS modules
 * of actor_rollout_ref.rollout.agent.agent_loops. A dataset row's agent_name picks one; rows without it run
 * agent.default_agent_loop (docs/agent-loops.md).
 */
import path from "node:path";
import { pathToFileURL } from "node:url";
import { InputError } from "../errors.js";
import type { AgentSection } from "./config.js";
import { singleTurnAgentLoop, toolAgentLoop, type AgentLoop, type SelectedAgentLoop } from "./agent-loop.js";

export const DEFAULT_AGENT_LOOP = "tool_agent";

const BUILTIN_LOOPS: Readonly<Record<string, AgentLoop>> = {
  tool_agent: toolAgentLoop,
  single_turn_agent: singleTurnAgentLoop,
};

/** The names a config registers, built-ins first; `default_agent_loop` must be one of them. */
export function agentLoopNames(agent: AgentSection): string[] {
  return [...new Set([...Object.keys(BUILTIN_LOOPS), ...Object.keys(agent.agent_loops)])];
}

/** An InputError unless `agentName` (a row's, when set) names a registered loop; `where` names the row. */
export function checkAgentName(agentName: string | null | undefined, names: readonly string[], where: string): void {
  if (agentName == null || names.includes(agentName)) return;
  throw new InputError(`${where}: agent_name "${agentName}" is not a registered agent loop (registered: ${names.join(", ")})`, {
    hint: "register it under actor_rollout_ref.rollout.agent.agent_loops (name: module.mjs), or fix the row's agent_name",
  });
}

export class AgentLoopRegistry {
  private constructor(
    private readonly loops: ReadonlyMap<string, SelectedAgentLoop>,
    readonly defaultName: string,
  ) {}

  /** Only the built-ins, tool_agent the default. */
  static builtin(): AgentLoopRegistry {
    return AgentLoopRegistry.withLoops({});
  }

  /** The built-ins and `loops` (user loops, in process: a throw fails the trajectory), `defaultName` for rows without agent_name. */
  static withLoops(loops: Readonly<Record<string, AgentLoop>>, defaultName = DEFAULT_AGENT_LOOP): AgentLoopRegistry {
    const entries = new Map(Object.entries(BUILTIN_LOOPS).map(([name, loop]) => [name, { name, loop, builtin: true }]));
    for (const [name, loop] of Object.entries(loops)) entries.set(name, { name, loop, builtin: false });
    checkAgentName(defaultName, [...entries.keys()], "actor_rollout_ref.rollout.agent.default_agent_loop");
    return new AgentLoopRegistry(entries, defaultName);
  }

  /** The config's loops, their modules imported now, so a missing module or export fails before any rollout. */
  static async load(agent: AgentSection, cwd = process.cwd()): Promise<AgentLoopRegistry> {
    const loops: Record<string, AgentLoop> = {};
    for (const [name, modulePath] of Object.entries(agent.agent_loops)) loops[name] = await importAgentLoop(name, modulePath, cwd);
    return AgentLoopRegistry.withLoops(loops, agent.default_agent_loop);
  }

  names(): string[] {
    return [...this.loops.keys()];
  }

  /** The loop a row's agent_name picks (the default without one); an InputError naming `where` if none is registered. */
  select(agentName: string | null | undefined, where: string): SelectedAgentLoop {
    checkAgentName(agentName, this.names(), where);
    return this.loops.get(agentName ?? this.defaultName)!;
  }
}

/** A module's loop: its default export, or an export named agentLoop, each a function of the AgentLoopApi. */
async function importAgentLoop(name: string, modulePath: string, cwd: string): Promise<AgentLoop> {
  const where = `agent loop ${name} (${modulePath})`;
  if (modulePath.endsWith(".py")) {
    throw new InputError(`${where}: Python agent loops are not supported yet`, { hint: "write the loop as a .js/.mjs module (docs/agent-loops.md)" });
  }
  if (/\.(c|m)?ts$/.test(modulePath)) {
    throw new InputError(`${where}: TypeScript modules cannot be loaded by Node 20`, { hint: "compile it to .js (npx tsc) and register the .js file" });
  }
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(path.resolve(cwd, modulePath)).href)) as Record<string, unknown>;
  } catch (err) {
    throw new InputError(`${where}: cannot be loaded: ${(err as Error).message}`, { cause: err });
  }
  const loop = [mod["default"], mod["agentLoop"]].find((value) => typeof value === "function");
  if (!loop) {
    const exported = Object.keys(mod).filter((key) => typeof mod[key] === "function");
    throw new InputError(`${where}: no default export or agentLoop function; it exports ${exported.length ? exported.join(", ") : "no functions"}`, {
      hint: "export default async function (agent) { ... } (docs/agent-loops.md)",
    });
  }
  return loop as AgentLoop;
}
