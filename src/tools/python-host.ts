/**
 * Python tool classes from verl YAML (`class_name: my_pkg.tools.Gsm8kTool` or `tools/gsm8k.py#Gsm8kTool`): each
 * entry runs in a pool of `python -m agentrl_worker.tool_host` processes (worker/agentrl_worker/tool_host.py) spoken
 * to in JSON lines (docs/tool-host-protocol.md). An instance lives in the host process that created it; calls on it go
 * there. Every request has a deadline: past it (or when the caller's signal aborts) the host is asked to cancel the
 * call, and a host that does not answer within CANCEL_GRACE_MS (a tool blocking its event loop) is killed. A host that
 * dies fails its calls in flight with an error saying its instances are gone, and is restarted for later calls.
 * Under `tool_host.sandbox: bwrap` (the default) the host runs inside bubblewrap (src/tools/sandbox.ts) with the
 * tool's folder and the interpreter read-only and a private scratch folder as the only writable place.
 */
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { z } from "zod";
import { InputError } from "../errors.js";
import { PythonHostProcess, WORKER_DIR, defaultPythonExecutable, helloWithin, hostEnv, type HostHello, type Launch } from "../process/index.js";
import { resolveInterpreter, sandboxRefusal } from "./python-tool.js";
import { buildBwrapArgv, checkBwrap, probeInterpreter } from "./sandbox.js";

/** How long a host may take to answer a cancel before it is killed (a tool blocking the event loop). */
const CANCEL_GRACE_MS = 2_000;

/** `config.tool_host` of a Python tool entry (the rest of `config` goes to the tool class as verl passes it). */
export const toolHostConfigSchema = z.object({
  python: z.string().min(1).nullable().default(null).describe("the interpreter; null = the repository's .venv/bin/python, else python3"),
  workers: z.number().int().positive().max(64).default(1).describe("host processes; instances (tools) or trajectories (agent loops) are spread over them"),
  sandbox: z.enum(["bwrap", "none"]).default("bwrap").describe("bwrap: the host runs inside bubblewrap, and nothing runs without it; none: a plain child process (opt-in)"),
  bwrap: z.string().min(1).default("bwrap").describe("the bubblewrap executable"),
  allow_network: z.boolean().default(false).describe("give the sandboxed host the network"),
  startup_timeout_s: z.number().positive().default(60).describe("seconds a host may take to import the user's code and start"),
  memory_limit_mb: z
    .number().int().positive().nullable().default(4096)
    .describe("address space of each host process (RLIMIT_AS, as the python code tool sets it): a runaway allocation is a MemoryError in that call; null = none"),
  max_file_size_mb: z
    .number().int().nonnegative().nullable().default(64)
    .describe("largest file a host process may write (RLIMIT_FSIZE): past it the write fails; null = none"),
});
export type ToolHostConfig = z.infer<typeof toolHostConfigSchema>;

/** What a pool runs: the class, the entry's config and schema, and the folders its imports come from. */
export interface ToolHostSpec {
  /** As the host reads it: `pkg.mod.Class` or `/abs/file.py#Class`. */
  className: string;
  /** The class as the YAML names it, for messages. */
  label: string;
  toolName: string;
  config: Record<string, unknown>;
  toolSchema: Record<string, unknown>;
  /** Folders put first on sys.path (the YAML's folder); bound read-only in the sandbox. */
  paths: readonly string[];
  host: ToolHostConfig;
}

export interface HostReply {
  id?: number;
  ok?: boolean;
  kind?: string;
  error?: string;
  [key: string]: unknown;
}

interface Pending {
  op: string;
  resolve(reply: HostReply): void;
  reject(err: Error): void;
}

/** Thrown for a call whose host died: the message is the observation the model sees. */
export class ToolHostCrash extends Error {}

/** A `python -m agentrl_worker.<module>` host: its arguments, the user's folders, and how it is sandboxed. */
export interface PythonHostLaunchSpec {
  module: string;
  args: readonly string[];
  /** Folders put first on sys.path; bound read-only in the sandbox. */
  paths: readonly string[];
  host: ToolHostConfig;
}

/**
 * The command that starts a host: under `sandbox: none` the interpreter itself (watching agentrl's pid); under bwrap
 * the interpreter inside bubblewrap with the user's folders read-only and a private scratch folder as its home.
 */
async function pythonHostLaunch(spec: PythonHostLaunchSpec, python: string): Promise<Launch> {
  const mb = (value: number | null) => (value === null ? null : value * 1024 * 1024);
  const rlimits = { memory_bytes: mb(spec.host.memory_limit_mb), file_size_bytes: mb(spec.host.max_file_size_mb) };
  const hostArgs = ["-m", `agentrl_worker.${spec.module}`, ...spec.args, "--rlimits", JSON.stringify(rlimits)];
  for (const p of spec.paths) hostArgs.push("--path", p);
  if (spec.host.sandbox === "none") {
    return { command: python, args: [...hostArgs, "--parent-pid", String(process.pid)], env: hostEnv(spec.paths), scratch: undefined };
  }
  const prefixes = await probeInterpreter(python);
  const scratch = mkdtempSync(path.join(os.tmpdir(), "agentrl-host-"));
  const env = {
    PATH: "/usr/local/bin:/usr/bin:/bin",
    HOME: scratch,
    TMPDIR: "/tmp",
    LANG: "C.UTF-8",
    PYTHONUNBUFFERED: "1",
    PYTHONDONTWRITEBYTECODE: "1",
    PYTHONPATH: [WORKER_DIR, ...spec.paths].join(path.delimiter),
  };
  const argv = buildBwrapArgv({
    command: [python, ...hostArgs],
    workDir: scratch,
    readOnly: [...prefixes, WORKER_DIR, ...spec.paths],
    env,
    allowNetwork: spec.host.allow_network,
    tmpBytes: 64 * 1024 * 1024,
    asRoot: false,
  });
  return { command: resolveInterpreter(spec.host.bwrap), args: argv, env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" }, scratch };
}

/**
 * Starts a Python host: its interpreter and launch, the process `make` builds on it, and its start-up line within
 * startup_timeout_s. A host that fails to start is closed and rejected with `failure`'s error (the start-up line, or
 * `kind: "spawn"` when it could not be launched, with the last stderr line).
 */
export async function startPythonHost<H extends PythonHostProcess>(
  spec: PythonHostLaunchSpec,
  make: (launch: Launch) => H,
  label: string,
  failure: (python: string, hello: HostHello, stderr: string) => Error,
): Promise<H> {
  const python = resolveInterpreter(spec.host.python ?? defaultPythonExecutable());
  let launch: Launch;
  try {
    launch = await pythonHostLaunch(spec, python);
  } catch (err) {
    throw failure(python, { ready: false, kind: "spawn", error: (err as Error).message }, "");
  }
  const host = make(launch);
  const hello = await helloWithin(host.hello, spec.host.startup_timeout_s * 1000, label);
  if (!hello.ready) {
    await host.close();
    throw failure(python, hello, host.lastStderr());
  }
  return host;
}

/** One tool_host process: requests by id, deadlines with cancel-then-kill, and its instances. */
export class ToolHostProcess extends PythonHostProcess {
  readonly instances = new Set<string>();
  private readonly pending = new Map<number, Pending>();
  /** Requests given up on (deadline or abort) whose cancel the host has not answered yet. */
  private readonly cancelling = new Map<number, NodeJS.Timeout>();
  private nextId = 1;

  constructor(
    private readonly spec: ToolHostSpec,
    launch: Launch,
    onDead: (host: ToolHostProcess) => void,
  ) {
    super(launch, { label: `the Python tool host of ${spec.toolName}`, stderrPrefix: `tool ${spec.toolName}` }, () => onDead(this));
  }

  /** A call past its limit has not stopped yet: the host may be stuck (and about to be killed). */
  get stalled(): boolean {
    return this.cancelling.size > 0;
  }

  /** Sends one request; rejects at the deadline or on abort (then cancels it in the host), or when the host dies. */
  request(op: string, body: Record<string, unknown>, timeoutMs: number, signal?: AbortSignal): Promise<HostReply> {
    if (!this.alive) return Promise.reject(new ToolHostCrash(`the Python tool host of ${this.spec.toolName} is not running`));
    const id = this.nextId++;
    return new Promise<HostReply>((resolve, reject) => {
      const giveUp = (err: Error) => {
        if (!this.pending.delete(id)) return;
        cleanup();
        reject(err);
        this.cancel(id);
      };
      const timer = setTimeout(() => giveUp(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
      const onAbort = () => giveUp(new Error("the call was cancelled"));
      const cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      const settle = <T>(fn: (v: T) => void) => (v: T) => (cleanup(), fn(v));
      this.pending.set(id, { op, resolve: settle(resolve), reject: settle(reject) });
      this.process.send({ id, op, ...body });
      if (signal?.aborted) onAbort();
    });
  }

  /** Asks the host to cancel request `id`; a host that does not answer in time is killed (and restarted). */
  private cancel(id: number): void {
    this.process.send({ op: "cancel", target: id });
    this.cancelling.set(
      id,
      setTimeout(() => {
        this.cancelling.delete(id);
        process.stderr.write(`warning: the Python tool host of ${this.spec.toolName} did not stop a call that ran past its limit; it was killed and restarted\n`);
        this.kill();
      }, CANCEL_GRACE_MS),
    );
  }

  protected received(message: unknown): void {
    const reply = message as HostReply;
    if (typeof reply.id !== "number") return;
    const stale = this.cancelling.get(reply.id);
    if (stale) {
      clearTimeout(stale);
      this.cancelling.delete(reply.id);
    }
    const pending = this.pending.get(reply.id);
    if (!pending) return;
    this.pending.delete(reply.id);
    pending.resolve(reply);
  }

  protected died(): void {
    for (const timer of this.cancelling.values()) clearTimeout(timer);
    this.cancelling.clear();
    const lost = this.instances.size;
    const last = this.lastStderr();
    for (const [, pending] of this.pending) {
      pending.reject(
        new ToolHostCrash(
          `the Python tool host of ${this.spec.toolName} (${this.spec.label}) exited (${this.process.exitText}) during ${pending.op}${last ? `: ${last}` : ""}. ` +
            `The ${lost} tool instance(s) it held are gone, this call's included; the host was restarted for later calls`,
        ),
      );
    }
    this.pending.clear();
  }
}

/** Why a python tool cannot start under `config` (bwrap missing and no opt-in to sandbox: none); null when it can. */
export async function toolHostSandboxProblem(config: ToolHostConfig): Promise<string | null> {
  if (config.sandbox === "none") return null;
  const problem = await checkBwrap(resolveInterpreter(config.bwrap));
  return problem === null ? null : sandboxRefusal(problem, "The Python tool host runs your tool class only inside bubblewrap (config key tool_host.sandbox: bwrap)", "tool_host.bwrap", "tool_host.sandbox: none");
}

/** Starts a host; rejects with the failed start-up line as an InputError naming the file and class. */
export function startToolHost(spec: ToolHostSpec, where: string, onDead: (host: ToolHostProcess) => void): Promise<ToolHostProcess> {
  const args = ["--class", spec.className, "--config", JSON.stringify(spec.config), "--schema", JSON.stringify(spec.toolSchema)];
  return startPythonHost(
    { module: "tool_host", args, paths: spec.paths, host: spec.host },
    (launch) => new ToolHostProcess(spec, launch, onDead),
    `the Python tool host of ${spec.toolName}`,
    (python, hello, stderr) => startupError(spec, where, python, hello, stderr),
  );
}

function startupError(spec: ToolHostSpec, where: string, python: string, hello: HostHello, stderr: string): InputError {
  const classes = (hello["classes"] as string[] | undefined) ?? [];
  const listed = classes.length ? `; it defines: ${classes.join(", ")}` : "";
  const what = `Python tool class ${spec.label}`;
  if (hello.kind === "missing" || hello.kind === "not_class") {
    return new InputError(`${where}.class_name: ${what}: ${hello.error}${listed}`, { hint: "name a class with verl's BaseTool interface: module.Class or file.py#Class" });
  }
  if (hello.kind === "load" && !spec.className.includes("#") && hello.error?.startsWith("ModuleNotFoundError")) {
    return new InputError(`${where}.class_name: unknown tool class ${JSON.stringify(spec.label)}: not a built-in, and Python cannot import it: ${hello.error}`, {
      hint: `built-ins: see docs/tools.md; a Python module must be importable from the YAML's folder (${spec.paths.join(", ")}) or the interpreter's packages`,
    });
  }
  if (hello.kind === "load") {
    return new InputError(`${where}.class_name: cannot import ${what}: ${hello.error}`, { hint: "fix the file; `python -c 'import MODULE'` shows the same error" });
  }
  if (hello.kind === "init") return new InputError(`${where}: constructing ${what} failed: ${hello.error}`);
  const detail = [hello.error, stderr].filter(Boolean).join(": ");
  return new InputError(`${where}: cannot start the Python tool host for ${spec.label} with ${python}: ${detail}`, {
    hint: "set config.tool_host.python to a Python 3 interpreter (the repository's .venv is the default)",
  });
}
