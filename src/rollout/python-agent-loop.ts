/**
 * Agent loops written in Python: `python -m agentrl_worker.agent_loop_host` (worker/agentrl_worker/agent_loop_host.py)
 * runs the user's loop for every trajectory that picks it, as asyncio tasks, and calls each primitive back here over
 * JSON lines (docs/tool-host-protocol.md, "Agent loop host"). So a Python loop gets exactly the JS loops' API and
 * guarantees: the token record and its masks never leave this process.
 *
 * The host runs like the Python tool host (the same launch, bubblewrap by default, agent.python_host): it starts with
 * the run, and a loop that cannot load stops the run at start-up (exit 2, naming the loop and the file). At a
 * trajectory's deadline its loop is cancelled in the host. A host that dies fails the trajectories it was running,
 * naming its exit, and is started again for the next ones.
 */
import { z } from "zod";
import { InputError } from "../errors.js";
import { HostPool, PythonHostProcess, type HostHello, type Launch } from "../process/index.js";
import { startPythonHost, toolHostSandboxProblem, type ToolHostConfig } from "../tools/index.js";
import type { AgentLoop, AgentLoopApi } from "./agent-loop.js";
import { PRIMITIVES, trajectoryInfo } from "./python-agent-primitives.js";
import { errorText, type Finish } from "./trajectory-state.js";

export interface PythonAgentLoopSpec {
  /** The registered name, for messages. */
  name: string;
  /** `pkg.mod.fn`, `/abs/file.py#fn` or `/abs/file.py` (its agent_loop). */
  target: string;
  /** The target as the config wrote it, for messages. */
  label: string;
  /** Keyword arguments of a loop class (the YAML entry's other keys). */
  kwargs: Record<string, unknown>;
  /** Folders put first on sys.path (the file's), read-only in the sandbox. */
  paths: readonly string[];
  host: ToolHostConfig;
  /** Where the loop is configured: `actor_rollout_ref.rollout.agent.agent_loops.NAME`. */
  where: string;
}

const hostMessageSchema = z.union([
  z.object({ call: z.number().int(), run: z.number().int(), op: z.string(), args: z.record(z.string(), z.unknown()).default({}) }),
  z.object({ id: z.number().int(), ok: z.boolean(), finish: z.unknown().optional(), kind: z.string().optional(), error: z.string().optional() }),
]);
type HostMessage = z.infer<typeof hostMessageSchema>;

interface RunningLoop {
  api: AgentLoopApi;
  resolve(finish: Finish | undefined): void;
  reject(err: Error): void;
}

/** One agent_loop_host process and the trajectories it runs. */
class AgentLoopHostProcess extends PythonHostProcess {
  private readonly runs = new Map<number, RunningLoop>();
  private nextId = 1;

  constructor(
    private readonly spec: PythonAgentLoopSpec,
    launch: Launch,
    onDead: () => void,
  ) {
    super(launch, { label: `the Python agent loop host of ${spec.name}`, stderrPrefix: `agent loop ${spec.name}` }, onDead);
  }

  /** Runs the loop on one trajectory; cancels it in the host at the trajectory's deadline. */
  run(api: AgentLoopApi): Promise<Finish | undefined> {
    if (!this.alive) return Promise.reject(new Error(`the Python agent loop host of ${this.spec.name} is not running`));
    const id = this.nextId++;
    return new Promise<Finish | undefined>((resolve, reject) => {
      const onAbort = () => this.process.send({ op: "cancel", target: id });
      const done = () => api.signal.removeEventListener("abort", onAbort);
      this.runs.set(id, { api, resolve: (finish) => (done(), resolve(finish)), reject: (err) => (done(), reject(err)) });
      api.signal.addEventListener("abort", onAbort, { once: true });
      this.process.send({ id, op: "run", trajectory: trajectoryInfo(api) });
    });
  }

  protected received(raw: unknown): void {
    const parsed = hostMessageSchema.safeParse(raw);
    if (!parsed.success) return; // not a message of this protocol: nothing waits on it
    const message = parsed.data;
    if ("call" in message) void this.primitive(message);
    else this.ended(message);
  }

  private async primitive(message: Extract<HostMessage, { call: number }>): Promise<void> {
    const running = this.runs.get(message.run);
    const primitive = PRIMITIVES[message.op];
    try {
      if (!running) throw new Error(`trajectory run ${message.run} is not running in this host`);
      if (!primitive) throw new Error(`unknown primitive ${JSON.stringify(message.op)} (known: ${Object.keys(PRIMITIVES).join(", ")})`);
      const result = await primitive(running.api, message.args);
      this.process.send({ reply: message.call, ok: true, result: result ?? null });
    } catch (err) {
      this.process.send({ reply: message.call, ok: false, error: errorText(err) });
    }
  }

  private ended(message: Extract<HostMessage, { id: number }>): void {
    const running = this.runs.get(message.id);
    if (!running) return;
    this.runs.delete(message.id);
    if (message.ok) running.resolve((message.finish ?? undefined) as Finish | undefined);
    else if (message.kind === "cancelled") running.resolve(undefined); // the deadline's finish stands
    else running.reject(new Error(message.error ?? "the loop failed"));
  }

  protected died(): void {
    const last = this.lastStderr();
    for (const running of this.runs.values()) {
      running.reject(new Error(`the Python agent loop host exited (${this.process.exitText})${last ? `: ${last}` : ""}; it was restarted for later trajectories`));
    }
    this.runs.clear();
  }
}

/**
 * A Python agent loop: python_host.workers hosts, started now (a loop that cannot load is an InputError), each
 * restarted when it dies; each trajectory goes to the host with the fewest running.
 */
export class PythonAgentLoop {
  private readonly hosts: HostPool<AgentLoopHostProcess>;

  private constructor(private readonly spec: PythonAgentLoopSpec) {
    const label = `the Python agent loop host of ${spec.name}`;
    this.hosts = new HostPool(spec.host.workers, () => label, (onDead) => this.start(onDead));
  }

  static async load(spec: PythonAgentLoopSpec): Promise<PythonAgentLoop> {
    const problem = await toolHostSandboxProblem(spec.host);
    if (problem) throw new InputError(`${spec.where}: ${problem}`);
    const loop = new PythonAgentLoop(spec);
    await loop.hosts.load();
    return loop;
  }

  /** The loop as the registry runs it. */
  readonly loop: AgentLoop = (api) => this.hosts.run((host) => host.run(api));

  private start(onDead: () => void): Promise<AgentLoopHostProcess> {
    const { spec } = this;
    const args = ["--loop", spec.target, "--kwargs", JSON.stringify(spec.kwargs)];
    return startPythonHost(
      { module: "agent_loop_host", args, paths: spec.paths, host: spec.host },
      (launch) => new AgentLoopHostProcess(spec, launch, onDead),
      `the Python agent loop host of ${spec.name}`,
      (python, hello, stderr) => startupError(spec, python, hello, stderr),
    );
  }

  close(): Promise<void> {
    return this.hosts.close();
  }
}

function startupError(spec: PythonAgentLoopSpec, python: string, hello: HostHello, stderr: string): InputError {
  const names = (hello["classes"] as string[] | undefined) ?? [];
  const listed = names.length ? `; it defines: ${names.join(", ")}` : "";
  const what = `Python agent loop ${spec.label}`;
  if (hello.kind === "verl_agent_loop") {
    return new InputError(`${spec.where}: ${what}: ${hello.error}`, {
      hint: "port its run() to agentrl's loop API: async def agent_loop(agent), with agent.generate(), agent.call_tools(), agent.append() (docs/agent-loops.md)",
    });
  }
  if (hello.kind === "missing" || hello.kind === "not_loop" || hello.kind === "init") {
    return new InputError(`${spec.where}: ${what}: ${hello.error}${listed}`, { hint: "name an `async def agent_loop(agent)` function, or a class with `async def run(self, agent)`" });
  }
  if (hello.kind === "load") return new InputError(`${spec.where}: cannot import ${what}: ${hello.error}`, { hint: "fix the file; `python -c 'import MODULE'` shows the same error" });
  const detail = [hello.error, stderr].filter(Boolean).join(": ");
  return new InputError(`${spec.where}: cannot start the Python agent loop host for ${spec.label} with ${python}: ${detail}`, {
    hint: "set actor_rollout_ref.rollout.agent.python_host.python to a Python 3 interpreter (the repository's .venv is the default)",
  });
}
