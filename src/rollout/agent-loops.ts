/**
 * The agent loops a rollout knows, by name: the built-ins (tool_agent, single_turn_agent) and the user's JS modules
 * of actor_rollout_ref.rollout.agent.agent_loops. A dataset row's agent_name picks one; rows without it run
 * agent.default_agent_loop (docs/agent-loops.md).
 */
import path from "node:path";
import { pathToFileURL } from "node:url";
import { InputError } from "../errors.js";
import { pythonClassPath } from "../tools/index.js";
import type { AgentSection } from "./config.js";
import { singleTurnAgentLoop, toolAgentLoop, type AgentLoop, type SelectedAgentLoop } from "./agent-loop.js";
import { readAgentLoopFile } from "./agent-loop-file.js";
import { PythonAgentLoop } from "./python-agent-loop.js";
import type { OpenaiAgents } from "../gateway/agents.js";

/** What a registry ends at close(): Python loop hosts, the OpenAI-API agents (their gateway and launcher). */
interface Closable {
  close(): Promise<void>;
}

export const DEFAULT_AGENT_LOOP = "tool_agent";

const BUILTIN_LOOPS: Readonly<Record<string, AgentLoop>> = {
  tool_agent: toolAgentLoop,
  single_turn_agent: singleTurnAgentLoop,
};

/** The names a config registers, built-ins first, agent_loop_config_path's read but nothing loaded. */
export async function agentLoopNames(agent: AgentSection): Promise<string[]> {
  const fromFile = agent.agent_loop_config_path ? (await readAgentLoopFile(agent.agent_loop_config_path)).map((entry) => entry.name) : [];
  return [...new Set([...Object.keys(BUILTIN_LOOPS), ...Object.keys(agent.agent_loops), ...fromFile])];
}

/** An InputError unless `agentName` (a row's, when set) names a registered loop; `where` names the row. */
export function checkAgentName(agentName: string | null | undefined, names: readonly string[], where: string): void {
  if (agentName == null || names.includes(agentName)) return;
  throw new InputError(`${where}: agent_name "${agentName}" is not a registered agent loop (registered: ${names.join(", ")})`, {
    hint: "register it under actor_rollout_ref.rollout.agent.agent_loops (name: module.mjs or module.py) or in agent_loop_config_path, or fix the row's agent_name",
  });
}

export class AgentLoopRegistry {
  private constructor(
    private readonly loops: ReadonlyMap<string, SelectedAgentLoop>,
    readonly defaultName: string,
    /** Python loops' hosts and the gateway, ended by close(). */
    private readonly hosts: readonly Closable[] = [],
  ) {}

  /** Only the built-ins, tool_agent the default. */
  static builtin(): AgentLoopRegistry {
    return AgentLoopRegistry.withLoops({});
  }

  /** The built-ins and `loops` (user loops, in process: a throw fails the trajectory), `defaultName` for rows without agent_name. */
  static withLoops(
    loops: Readonly<Record<string, AgentLoop | SelectedAgentLoop>>,
    defaultName = DEFAULT_AGENT_LOOP,
    hosts: readonly Closable[] = [],
  ): AgentLoopRegistry {
    const entries = new Map<string, SelectedAgentLoop>(Object.entries(BUILTIN_LOOPS).map(([name, loop]) => [name, { name, loop, builtin: true }]));
    for (const [name, loop] of Object.entries(loops)) {
      entries.set(name, typeof loop === "function" ? { name, loop, builtin: Object.values(BUILTIN_LOOPS).includes(loop) } : loop);
    }
    checkAgentName(defaultName, [...entries.keys()], "actor_rollout_ref.rollout.agent.default_agent_loop");
    return new AgentLoopRegistry(entries, defaultName, hosts);
  }

  /**
   * The config's loops (agent_loops, then agent_loop_config_path's), JS modules imported and Python hosts started
   * now, so a missing module, export or function fails before any rollout.
   */
  static async load(agent: AgentSection, cwd = process.cwd(), modelName = "agentrl"): Promise<AgentLoopRegistry> {
    const loops: Record<string, AgentLoop | SelectedAgentLoop> = {};
    const hosts: Closable[] = [];
    let openai: OpenaiAgents | undefined;
    // A module path is relative to `dir` (the working folder, or the agent loop file's); a dotted one is imported
    // from the working folder.
    const add = async (name: string, target: string, dir: string, where: string, kwargs: Record<string, unknown>) => {
      const python = pythonClassPath(target);
      if (!python) return void (loops[name] = await importAgentLoop(where, target, dir));
      const file = "file" in python ? path.resolve(dir, python.file) : undefined;
      const resolved = "file" in python ? `${file}${python.className ? `#${python.className}` : ""}` : python.dotted;
      const paths = [file ? path.dirname(file) : cwd];
      const host = await PythonAgentLoop.load({ name, label: target, kwargs, where, host: agent.python_host, target: resolved, paths });
      hosts.push(host);
      loops[name] = host.loop;
    };
    try {
      for (const [name, target] of Object.entries(agent.agent_loops)) {
        if (typeof target === "string") {
          await add(name, target, cwd, `agent loop ${name} (${target})`, {});
          continue;
        }
        if (!openai) {
          // Loaded only here: a run without OpenAI-API agents never loads the gateway.
          const { OpenaiAgents } = await import("../gateway/agents.js");
          hosts.push((openai = new OpenaiAgents(modelName, cwd)));
        }
        loops[name] = await openai.add(name, target);
      }
      for (const entry of agent.agent_loop_config_path ? await readAgentLoopFile(agent.agent_loop_config_path) : []) {
        if (entry.name in loops) throw new InputError(`${entry.where}: agent loop ${entry.name} is also registered in actor_rollout_ref.rollout.agent.agent_loops`);
        if ("builtin" in entry.loop) loops[entry.name] = BUILTIN_LOOPS[entry.loop.builtin]!;
        else await add(entry.name, entry.loop.target, entry.dir, `${entry.where} (${entry.loop.target})`, entry.kwargs);
      }
      return AgentLoopRegistry.withLoops(loops, agent.default_agent_loop, hosts);
    } catch (err) {
      await Promise.all(hosts.map((host) => host.close()));
      throw err;
    }
  }

  names(): string[] {
    return [...this.loops.keys()];
  }

  /** The loop a row's agent_name picks (the default without one); an InputError naming `where` if none is registered. */
  select(agentName: string | null | undefined, where: string): SelectedAgentLoop {
    checkAgentName(agentName, this.names(), where);
    return this.loops.get(agentName ?? this.defaultName)!;
  }

  /** Ends the Python loops' hosts. */
  async close(): Promise<void> {
    await Promise.all(this.hosts.map((host) => host.close()));
  }
}

/** A module's loop: its default export, or an export named agentLoop, each a function of the AgentLoopApi. */
async function importAgentLoop(where: string, modulePath: string, cwd: string): Promise<AgentLoop> {
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
