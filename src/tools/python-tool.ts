/**
 * A local Python code interpreter tool (parameter `code`). Each call runs in a fresh child process under bubblewrap
 * (src/tools/sandbox.ts: new PID, network, IPC and mount namespaces, read-only system paths, one writable scratch
 * folder, a clean environment), spawned with an argument array (never a shell), with a wall-clock timeout, a cap on
 * captured output, and the rlimits of the prelude. `sandbox: none` is the weaker, opt-in mode without bwrap.
 * What is and is not enforced is listed in docs/security.md.
 *
 * Text: stdout + stderr (as verl's SandboxFusionTool joins them), plus one bracketed line when the run was
 * stopped: `[timed out after 5s]`, `[output exceeded 65536 bytes; stopped]`, `[killed by SIGKILL]`.
 */
import { spawn, type ChildProcessByStdio } from "node:child_process";
import { accessSync, constants as fsConstants } from "node:fs";
import { chown, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Readable } from "node:stream";
import { z } from "zod";
import { BaseTool } from "./base-tool.js";
import { PYTHON_PRELUDE } from "./python-sandbox-prelude.js";
import { buildBwrapArgv, checkBwrap, probeInterpreter } from "./sandbox.js";
import type { OpenAIFunctionToolSchema } from "./schema.js";
import type { ToolContext, ToolExecuteResult } from "./types.js";
import { ToolOutputError } from "./tool-errors.js";

/** The tool's keys in the YAML `config` block (next to verl's `type`). */
export const pythonToolConfigSchema = z.object({
  python: z.string().min(1).default("python3"),
  timeout_s: z.number().positive().max(3600).default(10),
  memory_limit_mb: z.number().int().positive().default(1024),
  max_output_bytes: z.number().int().positive().default(64 * 1024),
  max_file_size_mb: z.number().int().nonnegative().default(16),
  allow_network: z.boolean().default(false),
  allow_subprocess: z.boolean().default(false),
  /** `bwrap`: run under bubblewrap, refuse to run when it is missing. `none`: the weaker prelude-only mode (opt-in). */
  sandbox: z.enum(["bwrap", "none"]).default("bwrap"),
  /** The bubblewrap binary: a bare name is looked up on agentrl's PATH. */
  bwrap: z.string().min(1).default("bwrap"),
  /** RLIMIT_NPROC inside the sandbox (processes and threads of the sandbox user). */
  max_processes: z.number().int().positive().default(32),
  /** When agentrl runs as root, the sandboxed code runs as this uid/gid (root would ignore RLIMIT_NPROC). */
  run_as_uid: z.number().int().positive().default(65534),
  run_as_gid: z.number().int().positive().default(65534),
});
export type PythonToolConfig = z.infer<typeof pythonToolConfigSchema>;

export type PythonRunStatus = "finished" | "timeout" | "output_limit" | "killed" | "aborted" | "refused";

export interface PythonRunResult {
  status: PythonRunStatus;
  exitCode: number | null;
  signal: string | null;
  stdout: Uint8Array;
  stderr: Uint8Array;
  /** What the prelude reported it enforced (network mode, limits, processes); null if it never got that far. */
  sandbox: Record<string, unknown> | null;
  wallMs: number;
}

/**
 * Finds a bare command name (`python3`) on agentrl's own PATH, so the user's pyenv/conda/venv interpreter is used
 * even though the child itself gets a minimal PATH. Names with a slash are used as given.
 */
export function resolveInterpreter(command: string, searchPath = process.env["PATH"] ?? ""): string {
  if (command.includes("/")) return command;
  for (const dir of searchPath.split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, command);
    try {
      accessSync(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return command;
}

/** Why code cannot run under `config` (bwrap missing or broken and no opt-in to `sandbox: none`); null when it can. */
export async function pythonSandboxProblem(config: PythonToolConfig): Promise<string | null> {
  if (config.sandbox === "none") return null;
  const problem = await checkBwrap(resolveInterpreter(config.bwrap));
  if (problem === null) return null;
  return sandboxRefusal(problem, "The python code tool runs untrusted code only inside bubblewrap (config key sandbox: bwrap)", "bwrap", "sandbox: none");
}

/** The refusal when bwrap does not work: what the tool needs it for, and the keys that fix it or opt out. */
export function sandboxRefusal(problem: string, why: string, bwrapKey: string, optOut: string): string {
  return `${problem}. ${why}: install it (scripts/install.sh, or apt-get install bubblewrap), point the key ${bwrapKey} at it, or set ${optOut} to accept the weaker, unisolated mode`;
}

let warnedWeak = false;
function warnWeakOnce(): void {
  if (warnedWeak) return;
  warnedWeak = true;
  process.stderr.write(
    "warning: the python code tool runs with sandbox: none: model-written code can read your files and the environment of other processes (docs/security.md)\n",
  );
}

/** Runs `code` once under the limits of `config`. Never throws for anything the code does. */
export async function runPythonCode(code: string, config: PythonToolConfig, signal?: AbortSignal): Promise<PythonRunResult> {
  const started = performance.now();
  const problem = await pythonSandboxProblem(config);
  if (problem !== null) {
    return { status: "refused", exitCode: null, signal: null, stdout: new Uint8Array(), stderr: Buffer.from(problem), sandbox: null, wallMs: performance.now() - started };
  }
  if (config.sandbox === "none") warnWeakOnce();
  const workDir = await mkdtemp(path.join(os.tmpdir(), "agentrl-py-"));
  try {
    await writeFile(path.join(workDir, "prelude.py"), PYTHON_PRELUDE);
    await writeFile(path.join(workDir, "code.py"), code);
    const limits = JSON.stringify({
      allow_network: config.allow_network,
      allow_subprocess: config.allow_subprocess,
      memory_bytes: config.memory_limit_mb * 1024 * 1024,
      cpu_seconds: Math.ceil(config.timeout_s) + 1,
      file_size_bytes: config.max_file_size_mb * 1024 * 1024,
      parent_pid: process.pid,
      sandbox: config.sandbox,
      max_processes: config.max_processes,
      drop_to_uid: asRoot() ? config.run_as_uid : null,
      drop_to_gid: asRoot() ? config.run_as_gid : null,
    });
    if (config.sandbox === "bwrap" && asRoot()) await chown(workDir, config.run_as_uid, config.run_as_gid);
    const outcome = await runChild(config, workDir, limits, signal).catch((err: Error) => ({
      status: "refused" as const,
      exitCode: null,
      signal: null,
      stdout: new Uint8Array(),
      stderr: Buffer.from(`cannot start the sandbox: ${err.message}`),
    }));
    let sandbox: Record<string, unknown> | null = null;
    try {
      sandbox = JSON.parse(await readFile(path.join(workDir, "status.json"), "utf8")) as Record<string, unknown>;
    } catch {
      sandbox = null;
    }
    return { ...outcome, sandbox, wallMs: performance.now() - started };
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

const asRoot = () => process.getuid?.() === 0;

/** The program and arguments to spawn, and its environment: bwrap around the interpreter, or the bare interpreter. */
async function commandFor(config: PythonToolConfig, workDir: string, limits: string): Promise<{ file: string; args: string[]; env: Record<string, string> }> {
  const python = resolveInterpreter(config.python);
  // -I: ignore PYTHON* variables and the user's site dir; -X utf8: UTF-8 stdio; -B: no .pyc files.
  const pyArgs = ["-I", "-X", "utf8", "-B", "prelude.py", limits, "code.py"];
  const env: Record<string, string> = {
      PATH: "/usr/local/bin:/usr/bin:/bin",
      HOME: workDir,
      TMPDIR: workDir,
      LANG: "C.UTF-8",
      OMP_NUM_THREADS: "1",
      OPENBLAS_NUM_THREADS: "1",
      MKL_NUM_THREADS: "1",
  };
  if (config.sandbox === "none") return { file: python, args: pyArgs, env };
  const argv = buildBwrapArgv({
    command: [python, ...pyArgs],
    workDir,
    readOnly: await probeInterpreter(python),
    env: { ...env, TMPDIR: "/tmp" },
    allowNetwork: config.allow_network,
    tmpBytes: config.max_file_size_mb * 1024 * 1024,
    asRoot: asRoot(),
  });
  // bwrap itself gets no environment either: its own /proc/<pid>/environ is visible from inside the PID namespace.
  return { file: resolveInterpreter(config.bwrap), args: argv, env: { PATH: "/usr/bin:/bin" } };
}

/** Grace for the pipes to drain once the sandbox has exited (everything in it is dead by then). */
const DRAIN_MS = 500;

type ChildOutcome = Omit<PythonRunResult, "sandbox" | "wallMs">;
type SandboxChild = ChildProcessByStdio<null, Readable, Readable>;

async function runChild(config: PythonToolConfig, workDir: string, limits: string, signal: AbortSignal | undefined): Promise<ChildOutcome> {
  const command = await commandFor(config, workDir, limits);
  const child = spawn(command.file, command.args, {
    cwd: workDir,
    env: command.env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true, // its own process group, so children it forks are killed with it
  });
  return superviseChild(child, command.file, config, signal);
}

/** Watches the child to its end: caps its output, enforces the timeout and the caller's signal, kills its group. */
function superviseChild(child: SandboxChild, file: string, config: PythonToolConfig, signal: AbortSignal | undefined): Promise<ChildOutcome> {
  return new Promise((resolve) => {
    let status: PythonRunStatus = "finished";
    let settled = false;
    const stop = (why: PythonRunStatus) => {
      if (status === "finished") status = why;
      killGroup(child);
    };
    const output = captureOutput(child, config.max_output_bytes, () => stop("output_limit"));
    const timer = setTimeout(() => stop("timeout"), config.timeout_s * 1000);
    const onAbort = () => stop("aborted");
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) onAbort();

    const finish = (exitCode: number | null, sig: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      killGroup(child); // stray grandchildren that outlived the main process
      const exit = commandExit(config, exitCode, sig);
      if (status === "finished" && exit.signal !== null) status = "killed";
      resolve({ status, ...exit, stdout: Buffer.concat(output.stdout), stderr: Buffer.concat(output.stderr) });
    };
    child.on("error", (err) => {
      output.stderr.push(Buffer.from(`cannot start ${file}: ${err.message}\n`));
      finish(null, null);
    });
    onExitDrained(child, finish);
  });
}

function killGroup(child: SandboxChild): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // The group is already gone.
  }
}

/** Collects stdout and stderr up to `maxBytes` in all; output of exactly the cap is fine, one byte more calls `onLimit`. */
function captureOutput(child: SandboxChild, maxBytes: number, onLimit: () => void): { stdout: Buffer[]; stderr: Buffer[] } {
  const output = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  let captured = 0;
  const onData = (sink: Buffer[]) => (chunk: Buffer) => {
    const room = maxBytes - captured;
    if (chunk.length > room) {
      sink.push(chunk.subarray(0, Math.max(0, room)));
      captured = maxBytes;
      onLimit();
      return;
    }
    sink.push(chunk);
    captured += chunk.length;
  };
  child.stdout.on("data", onData(output.stdout));
  child.stderr.on("data", onData(output.stderr));
  return output;
}

/**
 * Once the main process is done, kills anything it left behind, then calls `finish` on "close" or, if something
 * still holds the pipes (a grandchild outside the sandbox's PID namespace in sandbox: none), after a short drain.
 */
function onExitDrained(child: SandboxChild, finish: (exitCode: number | null, sig: string | null) => void): void {
  child.on("exit", (code, sig) => {
    killGroup(child);
    const drain = setTimeout(() => {
      child.stdout.destroy();
      child.stderr.destroy();
      finish(code, sig);
    }, DRAIN_MS);
    child.once("close", () => {
      clearTimeout(drain);
      finish(code, sig);
    });
  });
}

/** The code's own exit: bwrap reports a command killed by a signal as exit code 128 + signal. */
function commandExit(config: PythonToolConfig, exitCode: number | null, sig: string | null): { exitCode: number | null; signal: string | null } {
  if (sig === null && config.sandbox === "bwrap" && exitCode !== null && exitCode > 128) {
    const name = Object.entries(os.constants.signals).find(([, n]) => n === exitCode - 128)?.[0];
    if (name) return { exitCode: null, signal: name };
  }
  return { exitCode, signal: sig };
}

/** Decodes captured bytes; a cut at the output cap may split a character, so only a truncated tail may be partial. */
function decodeOutput(bytes: Uint8Array, truncated: boolean): string {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  try {
    return decoder.decode(bytes, { stream: truncated });
  } catch {
    throw new ToolOutputError("invalid_output", "output is not valid UTF-8");
  }
}

export function describePythonRun(result: PythonRunResult, config: PythonToolConfig): string {
  const truncated = result.status === "output_limit";
  // Decode separately so a split character at the stdout/stderr seam is not mistaken for bad output.
  const text = decodeOutput(result.stdout, truncated) + decodeOutput(result.stderr, truncated);
  switch (result.status) {
    case "finished":
      return text;
    case "timeout":
      return `${text}${sep(text)}[timed out after ${config.timeout_s}s]`;
    case "output_limit":
      return `${text}${sep(text)}[output exceeded ${config.max_output_bytes} bytes; stopped]`;
    case "killed":
      return `${text}${sep(text)}[killed by ${result.signal}]`;
    case "aborted":
      return `${text}${sep(text)}[stopped: the call was cancelled]`;
    case "refused":
      return `Error: the code was not run: ${text}`;
  }
}

const sep = (text: string) => (text === "" || text.endsWith("\n") ? "" : "\n");

export class PythonCodeTool extends BaseTool {
  readonly settings: PythonToolConfig;

  constructor(config: Record<string, unknown>, schema: OpenAIFunctionToolSchema, settings: PythonToolConfig) {
    super(config, schema);
    this.settings = settings;
  }

  override async execute(_instanceId: string, parameters: Record<string, unknown>, ctx: ToolContext): Promise<ToolExecuteResult> {
    const code = parameters["code"];
    if (typeof code !== "string") {
      return { response: { text: "Error: parameter 'code' must be a string" }, reward: 0.0, metrics: { status: "bad_arguments" } };
    }
    const result = await runPythonCode(code, this.settings, ctx.signal);
    const text = describePythonRun(result, this.settings);
    return {
      response: { text },
      reward: 0.0,
      metrics: {
        status: result.status,
        exitCode: result.exitCode,
        signal: result.signal,
        wallMs: Math.round(result.wallMs),
        network: result.sandbox?.["network"] ?? "unknown",
      },
    };
  }
}
