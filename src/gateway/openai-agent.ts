/**
 * Agent loops of kind `openai`: the user's own agent, written against the OpenAI API, run once per trajectory with
 * the gateway as its model. As a command (any language) it is a process in its own process group, started by the
 * registry's agent launcher (agent-launcher.ts); as a Python function it is that function called in
 * agentrl_worker.openai_agent_host (python-agent-host.ts); as a JS function it runs in this process. Its requests
 * build the trajectory's token record through the gateway (session.ts); its result (the last stdout line, or the
 * function's return value) may carry the reward. A crash, a non-zero exit or the deadline fails the trajectory with
 * the reason, and the run goes on.
 */
import path from "node:path";
import { pathToFileURL } from "node:url";
import { InputError } from "../errors.js";
import { loopbackNoProxy } from "../process/index.js";
import type { SelectedAgentLoop, TrajectoryControl } from "../rollout/agent-loop.js";
import type { OpenaiAgentSpec } from "../rollout/config.js";
import type { Finish, TrajectoryInFlight } from "../rollout/trajectory-state.js";
import { runAgentProcess, type AgentProcessOutcome } from "./agent-process.js";
import type { AgentLauncher } from "./agent-launcher.js";
import { agentWrapper, type AgentWrapper } from "./agent-sandbox.js";
import { PythonAgentHost } from "./python-agent-host.js";
import { Gateway } from "./server.js";
import { GatewaySession, type NoteOnce } from "./session.js";

/** A JS agent function: a ready `openai` client and the row; its return value is its result. */
export type JsAgentFunction = (client: unknown, row: AgentRow) => unknown;

/** What the agent gets to work from: the row's prompt and its verl fields. */
export interface AgentRow {
  trajectory_id: string;
  data_index: number;
  sample_index: number;
  data_source: string;
  messages: unknown[];
  /** The tool schemas of multi_turn.tool_config_path, for an agent that offers the configured tools. */
  tools: unknown[];
  tools_kwargs: Record<string, unknown>;
  interaction_kwargs: Record<string, unknown>;
  extra_info: Record<string, unknown>;
  ground_truth: string;
}

export interface OpenaiAgentOptions {
  name: string;
  spec: OpenaiAgentSpec;
  gateway: Gateway;
  /** The registry's launcher of command agents; started by the first one. */
  launcher: AgentLauncher;
  /** Where the agent is configured, for messages. */
  where: string;
  cwd: string;
  note: NoteOnce;
}

/**
 * The loop, checked and loaded now (a JS function imported, a Python function's host started), so a bad agent fails
 * before any rollout; `close` ends what it started.
 */
export async function openaiAgentLoop(options: OpenaiAgentOptions): Promise<{ selected: SelectedAgentLoop; close(): Promise<void> }> {
  const launch = await agentLaunch(options);
  const internal = (api: TrajectoryControl, run: TrajectoryInFlight) => runOpenaiAgent(options, launch, api, run);
  return {
    selected: { name: options.name, builtin: false, loop: () => undefined, internal },
    close: async () => (launch.kind === "python" ? launch.host.close() : undefined),
  };
}

type Launch =
  | { kind: "process"; wrapper: AgentWrapper; noProxy: Record<string, string> }
  | { kind: "js"; fn: JsAgentFunction }
  | { kind: "python"; host: PythonAgentHost };

async function agentLaunch(options: OpenaiAgentOptions): Promise<Launch> {
  const { spec, where, cwd } = options;
  if (spec.command !== undefined) {
    const argv = typeof spec.command === "string" ? ["/bin/sh", "-c", spec.command] : spec.command;
    const wrapper = await agentWrapper(argv, spec, cwd, where);
    await options.launcher.start(where);
    // Worked out once: reading process.env whole costs ~45 µs a time.
    return { kind: "process", wrapper, noProxy: loopbackNoProxy({ ...process.env, ...spec.env }) };
  }
  const [file, name] = splitTarget(spec.function!);
  if (file.endsWith(".py")) {
    const resolved = path.resolve(cwd, file);
    return { kind: "python", host: await PythonAgentHost.load(options.name, `${resolved}#${name ?? "agent"}`, spec, where, [path.dirname(resolved)]) };
  }
  if (!/\.(m|c)?js$/.test(file)) throw new InputError(`${where}: function ${spec.function} is neither a .py nor a .js/.mjs file`);
  if (spec.sandbox !== "none") throw new InputError(`${where}: a JS function agent runs inside agentrl and cannot be sandboxed`, { hint: "run it as a command (command: node agent.mjs) to use sandbox: bwrap" });
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(path.resolve(cwd, file)).href)) as Record<string, unknown>;
  } catch (err) {
    throw new InputError(`${where}: ${file} cannot be loaded: ${(err as Error).message}`, { cause: err });
  }
  const fn = mod[name ?? "default"];
  if (typeof fn !== "function") {
    const exported = Object.keys(mod).filter((key) => typeof mod[key] === "function");
    throw new InputError(`${where}: ${file} has no function ${name ?? "default export"}; it exports ${exported.length ? exported.join(", ") : "no functions"}`);
  }
  return { kind: "js", fn: fn as JsAgentFunction };
}

function splitTarget(target: string): [string, string | undefined] {
  const hash = target.lastIndexOf("#");
  return hash < 0 ? [target, undefined] : [target.slice(0, hash), target.slice(hash + 1)];
}

async function runOpenaiAgent(options: OpenaiAgentOptions, launch: Launch, api: TrajectoryControl, run: TrajectoryInFlight): Promise<Finish> {
  const { gateway } = options;
  const key = Gateway.newKey();
  const session = new GatewaySession(key, api, run, options.note, options.spec.response_format);
  gateway.open(session);
  try {
    const row = agentRow(run);
    const outcome = launch.kind === "js"
      ? await runJsAgent(launch.fn, gateway.baseUrl(key), key, row)
      : launch.kind === "python"
        ? await launch.host.run(gateway.baseUrl(key), key, row, api.signal)
        : await runLaunched(launch.wrapper, options, { ...launch.noProxy, ...agentEnvironment(gateway.baseUrl(key), key, run.id) }, row, api.signal);
    // What the agent reported scores the episode however it ended; a Finish a primitive returned first (a length
    // cut, a turn limit, the deadline) is the outcome, since it is what the agent saw (a 409 it may have died of).
    const finish = outcomeFinish(options, outcome, run);
    return api.ended ?? finish;
  } finally {
    gateway.close(session);
  }
}

/**
 * What a command agent is given to reach its trajectory. The base URL goes in OPENAI_API_BASE too: LangChain's
 * ChatOpenAI (JS and Python) and other clients read that name first, so a value left in the user's shell (another
 * server) would send an unchanged agent's requests there instead. (NO_PROXY, with loopback added, goes with it:
 * src/process/no-proxy.ts.)
 */
function agentEnvironment(baseUrl: string, key: string, trajectoryId: string): Record<string, string> {
  return { OPENAI_BASE_URL: baseUrl, OPENAI_API_BASE: baseUrl, OPENAI_API_KEY: key, AGENTRL_TRAJECTORY_ID: trajectoryId };
}

/**
 * The OpenAI Agents SDK uploads traces to api.openai.com with OPENAI_API_KEY, which for an agent is its trajectory's
 * gateway key: a 401 online, and offline retries that hold up every agent's exit. Off for command agents unless
 * agentrl's environment or the agent's `env` sets it (worker/agentrl_worker/openai_agent_host.py does the same for
 * Python function agents).
 */
const AGENTS_TRACING = "OPENAI_AGENTS_DISABLE_TRACING";

async function runLaunched(wrapper: AgentWrapper, options: OpenaiAgentOptions, gatewayEnv: Record<string, string>, row: AgentRow, signal: AbortSignal): Promise<AgentProcessOutcome> {
  const tracingOff: Record<string, string> = process.env[AGENTS_TRACING] === undefined ? { [AGENTS_TRACING]: "true" } : {};
  const launch = wrapper({ ...tracingOff, ...options.spec.env, ...gatewayEnv });
  try {
    return await runAgentProcess({ launcher: options.launcher, argv: launch.argv, env: launch.env, cwd: options.cwd, input: JSON.stringify(row), signal });
  } finally {
    launch.cleanup();
  }
}

function agentRow(run: TrajectoryInFlight): AgentRow {
  const { sample } = run;
  return {
    trajectory_id: run.id,
    data_index: sample.dataIndex,
    sample_index: sample.sampleIndex,
    data_source: sample.dataSource,
    messages: sample.messages,
    tools: run.ctx.toolSchemas,
    tools_kwargs: sample.toolsKwargs,
    interaction_kwargs: sample.interactionKwargs,
    extra_info: sample.extraInfo,
    ground_truth: sample.groundTruth,
  };
}

async function runJsAgent(fn: JsAgentFunction, baseURL: string, apiKey: string, row: AgentRow): Promise<AgentProcessOutcome> {
  const { default: OpenAI } = await import("openai");
  // No retries: a refused request is the agent's answer, and a retry of a sampled turn would start a new segment.
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  try {
    const result = await fn(client, row);
    return { ok: true, lastLine: result === undefined ? undefined : JSON.stringify(result) };
  } catch (err) {
    return { ok: false, error: `threw ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}` };
  }
}

/** How the episode ended, from the agent's outcome; its reported reward goes on the trajectory. */
function outcomeFinish(options: OpenaiAgentOptions, outcome: AgentProcessOutcome, run: TrajectoryInFlight): Finish {
  const agent = `agent ${options.name}`;
  if (!outcome.ok) return { status: "failed", reason: "agent_error", error: `${agent} failed: ${outcome.error}` };
  const reported = options.spec.reward === "reward_function" ? undefined : reportedReward(outcome.lastLine);
  if (reported) run.agentReward = reported;
  if (!reported && options.spec.reward === "auto" && outcome.lastLine !== undefined) {
    // Said once a run: a log line printed after the reward would otherwise hand every trajectory to the reward
    // function without a word.
    const excerpt = outcome.lastLine.length > 80 ? `${outcome.lastLine.slice(0, 80)}…` : outcome.lastLine;
    options.note(
      `unreported-reward:${options.name}`,
      `${agent}'s last stdout line (or return value) is not a reward: ${JSON.stringify(excerpt)}; the reward function scores its trajectories (print {"reward": x} last to report one, or set reward: reward_function)`,
    );
  }
  if (run.conversation.assistantTurns === 0 && !run.closedSegments?.length) {
    return { status: "failed", reason: "no_model_call", error: `${agent} ended without calling the model: there is nothing to train on` };
  }
  if (!reported && options.spec.reward === "agent") {
    return { status: "failed", reason: "agent_error", error: `${agent} reported no reward: its last stdout line must be JSON like {"reward": 1.0} (reward: agent)` };
  }
  return { status: "completed", reason: "stop" };
}

/** `{"reward": x, ...}` from the agent's result: x the score, the other keys its reward_extra. A bare number is a reward too. */
export function reportedReward(line: string | undefined): { score: number; extra: Record<string, unknown> } | undefined {
  if (line === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof value === "number" && Number.isFinite(value)) return { score: value, extra: {} };
  if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
  const { reward, ...extra } = value as Record<string, unknown>;
  if (typeof reward === "boolean") return { score: reward ? 1 : 0, extra };
  return typeof reward === "number" && Number.isFinite(reward) ? { score: reward, extra } : undefined;
}
