/**
 * verl's agent loop file (actor_rollout_ref.rollout.agent.agent_loop_config_path): a YAML list of
 * `{name, _target_, ...kwargs}`. agentrl reads it as verl does, except that `_target_` names a loop on agentrl's API
 * (a Python function or class, or a JS module; docs/agent-loops.md), not a verl AgentLoopBase class; verl's own
 * ToolAgentLoop and SingleTurnAgentLoop name agentrl's built-ins.
 */
import path from "node:path";
import { z } from "zod";
import { InputError } from "../errors.js";
import { readYamlFile } from "../data/yaml-file.js";
import { formatIssues } from "../zod-issues.js";

/** verl's built-in loop classes, and the built-in of agentrl that does the same. */
const VERL_BUILTINS: Readonly<Record<string, string>> = {
  "verl.experimental.agent_loop.tool_agent_loop.ToolAgentLoop": "tool_agent",
  "verl.experimental.agent_loop.single_turn_agent_loop.SingleTurnAgentLoop": "single_turn_agent",
};

const entrySchema = z.looseObject({ name: z.string().min(1), _target_: z.string().min(1) });
const fileSchema = z.array(entrySchema).min(1, "expected a list of {name, _target_} entries");

/** One loop of the file: a module or a built-in's name. */
export interface AgentLoopFileEntry {
  name: string;
  /** `{ builtin }`: verl's class of a built-in; `{ target }`: the module as the file names it. */
  loop: { builtin: string } | { target: string };
  /** The file's folder: a module path in it is relative to it. */
  dir: string;
  /** The entry's other keys: keyword arguments of a Python loop class. */
  kwargs: Record<string, unknown>;
  /** `FILE: NAME`, for messages. */
  where: string;
}

export async function readAgentLoopFile(file: string): Promise<AgentLoopFileEntry[]> {
  const parsed = fileSchema.safeParse(await readYamlFile(file));
  if (!parsed.success) throw new InputError(`${file}: ${formatIssues(parsed.error, { only: "first" })}`, { hint: "verl's format: a list of entries `- name: my_loop` with `_target_: my_pkg.loops.my_loop`" });
  const dir = path.dirname(path.resolve(file));
  const seen = new Set<string>();
  return parsed.data.map(({ name, _target_: target, ...kwargs }, index) => {
    if (seen.has(name)) throw new InputError(`${file}: ${index}.name: ${name} is registered twice`);
    seen.add(name);
    const builtin = VERL_BUILTINS[target];
    return { name, loop: builtin ? { builtin } : { target }, dir, kwargs, where: `${file}: agent loop ${name}` };
  });
}
