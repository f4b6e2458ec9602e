/**
 * A verl Python tool class as an agentrl Tool: every lifecycle call goes to the tool's host pool (python-host.ts).
 * An instance stays in the host process that created it; one that was lost with a crashed host fails its later calls
 * with an error that says so, and releasing it is a no-op. Restarted hosts take the dead one's place.
 */
import path from "node:path";
import { InputError } from "../errors.js";
import { formatIssues } from "../zod-issues.js";
import { resolveInsideModuleDirs } from "./module-loader.js";
import { ToolHostCrash, ToolHostProcess, startToolHost, toolHostConfigSchema, toolHostSandboxProblem, type HostReply, type ToolHostSpec } from "./python-host.js";
import type { OpenAIFunctionToolSchema } from "./schema.js";
import type { Tool, ToolContext, ToolExecuteResult, ToolResponse } from "./types.js";

const JS_EXTENSION = /\.(m?js|cjs|m?ts|cts)(#.*)?$/;
const PY_FILE = /^(.*\.py)(?:[#:]([A-Za-z_]\w*))?$/;
const DOTTED = /^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$/;

/**
 * How a class_name that is not a built-in is read: a `.py` file (`tools/gsm8k.py#Gsm8kTool`, also `:Gsm8kTool`) or a
 * dotted Python path (`my_pkg.tools.Gsm8kTool`) is Python; a `.js/.mjs/.cjs` path is JS; null otherwise.
 */
export function pythonClassPath(className: string): { file: string; className: string | undefined } | { dotted: string } | null {
  const file = PY_FILE.exec(className);
  if (file) return { file: file[1]!, className: file[2] };
  if (DOTTED.test(className) && !JS_EXTENSION.test(className)) return { dotted: className };
  return null;
}

/** The pool's call deadline when the entry sets no call_timeout_s (the runner's default). */
const DEFAULT_HOST_TIMEOUT_MS = 30_000;

/** A failed reply as the error the runner shows the model: the exception's last line, or why the host refused. */
function failure(reply: HostReply, op: string): Error {
  return new Error(reply.error ?? `${op} failed`);
}

export class PythonHostTool implements Tool {
  readonly name: string;
  private readonly slots: Array<Promise<ToolHostProcess>> = [];
  /** Which host holds each live instance. */
  private readonly owners = new Map<string, ToolHostProcess>();
  private closed = false;

  private constructor(
    private readonly spec: ToolHostSpec,
    private readonly where: string,
    readonly schema: OpenAIFunctionToolSchema,
    readonly config: Record<string, unknown>,
    private readonly timeoutMs: number,
  ) {
    this.name = schema.function.name;
  }

  /** Starts the tool's hosts; a class that does not load is an InputError naming the YAML entry, the file and the class. */
  static async start(spec: ToolHostSpec, where: string, schema: OpenAIFunctionToolSchema, timeoutMs: number | undefined): Promise<PythonHostTool> {
    const tool = new PythonHostTool(spec, where, schema, spec.config, timeoutMs ?? DEFAULT_HOST_TIMEOUT_MS);
    for (let i = 0; i < spec.host.workers; i++) tool.slots.push(startToolHost(spec, where, (dead) => tool.restart(dead)));
    const started = await Promise.allSettled(tool.slots);
    const failed = started.find((r) => r.status === "rejected");
    if (failed) {
      await tool.close();
      throw (failed as PromiseRejectedResult).reason;
    }
    return tool;
  }

  private restart(dead: ToolHostProcess): void {
    if (this.closed) return;
    void Promise.all(this.slots.map((slot) => slot.catch(() => undefined))).then((hosts) => {
      const at = hosts.indexOf(dead);
      if (at < 0 || this.closed) return;
      const next = startToolHost(this.spec, this.where, (again) => this.restart(again)).catch((err: Error) => {
        throw new ToolHostCrash(`the Python tool host of ${this.name} could not be restarted: ${err.message}`);
      });
      next.catch(() => undefined);
      this.slots[at] = next;
    });
  }

  /** The running host with the fewest instances, avoiding one that may be stuck. */
  private async pickHost(): Promise<ToolHostProcess> {
    const settled = await Promise.allSettled(this.slots);
    const hosts = settled.flatMap((r) => (r.status === "fulfilled" && r.value.alive ? [r.value] : []));
    if (hosts.length === 0) {
      const reason = settled.find((r) => r.status === "rejected") as PromiseRejectedResult | undefined;
      throw reason?.reason instanceof Error ? reason.reason : new ToolHostCrash(`the Python tool host of ${this.name} is not running`);
    }
    const load = (h: ToolHostProcess) => (h.stalled ? 1e9 : 0) + h.instances.size;
    return hosts.reduce((a, b) => (load(b) < load(a) ? b : a));
  }

  private ownerOf(instanceId: string): ToolHostProcess {
    const host = this.owners.get(instanceId);
    if (!host) throw new Error(`tool instance ${instanceId} of ${this.name} does not exist (never created, or already released)`);
    if (!host.alive) {
      throw new ToolHostCrash(`tool instance ${instanceId} of ${this.name} was lost when its Python tool host exited; the host was restarted, and a new trajectory gets a new instance`);
    }
    return host;
  }

  async create(instanceId: string | undefined, kwargs: Record<string, unknown>): Promise<{ instanceId: string; response: ToolResponse }> {
    const host = await this.pickHost();
    const reply = await host.request("create", { instance_id: instanceId ?? null, kwargs }, this.timeoutMs);
    if (!reply.ok) throw failure(reply, "create");
    const id = String(reply["instance_id"]);
    host.instances.add(id);
    this.owners.set(id, host);
    return { instanceId: id, response: (reply["response"] as ToolResponse | undefined) ?? {} };
  }

  async execute(instanceId: string, parameters: Record<string, unknown>, ctx: ToolContext): Promise<ToolExecuteResult> {
    const agent = ctx.agentData;
    const body = {
      instance_id: instanceId,
      parameters,
      kwargs: ctx.kwargs ?? {},
      agent_data: agent ? { trajectory_id: agent.trajectoryId, turn: agent.turn, messages: agent.messages } : null,
    };
    const reply = await this.ownerOf(instanceId).request("execute", body, this.timeoutMs, ctx.signal);
    if (!reply.ok) throw failure(reply, "execute");
    const reward = reply["reward"];
    return { response: (reply["response"] as ToolResponse) ?? {}, reward: typeof reward === "number" ? reward : null, metrics: (reply["metrics"] as Record<string, unknown>) ?? {} };
  }

  async calcReward(instanceId: string, kwargs: Record<string, unknown> = {}): Promise<number> {
    const reply = await this.ownerOf(instanceId).request("calc_reward", { instance_id: instanceId, kwargs }, this.timeoutMs);
    if (!reply.ok) throw failure(reply, "calc_reward");
    return reply["reward"] as number;
  }

  async release(instanceId: string, kwargs: Record<string, unknown> = {}): Promise<void> {
    const host = this.owners.get(instanceId);
    this.owners.delete(instanceId);
    if (!host?.alive) return; // gone with its host: nothing left to release
    host.instances.delete(instanceId);
    const reply = await host.request("release", { instance_id: instanceId, kwargs }, this.timeoutMs);
    if (!reply.ok) throw failure(reply, "release");
  }

  async close(): Promise<void> {
    this.closed = true;
    const settled = await Promise.allSettled(this.slots);
    await Promise.all(settled.flatMap((r) => (r.status === "fulfilled" ? [r.value.close()] : [])));
  }
}

/** Builds a Python tool from a YAML entry (see pythonClassPath); checks the file lies in an allowed folder first. */
export async function buildPythonHostTool(
  entry: { class_name: string; config: Record<string, unknown>; tool_schema: OpenAIFunctionToolSchema },
  where: string,
  yamlDir: string,
  moduleDirs: readonly string[],
  timeoutMs: number | undefined,
): Promise<PythonHostTool> {
  const parsed = toolHostConfigSchema.safeParse(entry.config["tool_host"] ?? {});
  if (!parsed.success) throw new InputError(`${where}: ${formatIssues(parsed.error, { only: "first", at: "config.tool_host" })}`);
  const problem = await toolHostSandboxProblem(parsed.data);
  if (problem !== null) throw new InputError(`${where}.config.tool_host.sandbox: ${problem}`);
  if (parsed.data.sandbox === "none") warnUnsandboxedOnce();
  const spec = pythonClassPath(entry.class_name)!;
  let className: string;
  if ("file" in spec) {
    if (!spec.className) throw new InputError(`${where}.class_name: name the class in ${spec.file}: ${spec.file}#ClassName`);
    const real = resolveInsideModuleDirs(spec.file, yamlDir, moduleDirs, `${where}.class_name`);
    className = `${real}#${spec.className}`;
  } else {
    if (moduleDirs.length === 0) {
      throw new InputError(`${where}.class_name: unknown tool class ${JSON.stringify(spec.dotted)}`, {
        hint: "Python tool classes load only from the folder of the YAML file that names them (rollout, train, doctor)",
      });
    }
    className = spec.dotted;
  }
  const { tool_host: _hostKeys, ...config } = entry.config;
  const hostSpec: ToolHostSpec = {
    className,
    label: entry.class_name,
    toolName: entry.tool_schema.function.name,
    config,
    toolSchema: entry.tool_schema as unknown as Record<string, unknown>,
    paths: moduleDirs.map((dir) => path.resolve(dir)),
    host: parsed.data,
  };
  return PythonHostTool.start(hostSpec, where, entry.tool_schema, timeoutMs);
}

let warned = false;
function warnUnsandboxedOnce(): void {
  if (warned) return;
  warned = true;
  process.stderr.write("warning: a Python tool runs with tool_host.sandbox: none: its class runs as you, with your files and network (docs/security.md)\n");
}
