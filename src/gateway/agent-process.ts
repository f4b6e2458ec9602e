/**
 * One run of a user's OpenAI-API agent as a child process: its own process group (so a kill reaches whatever it
 * started), the gateway's base URL and key in OPENAI_BASE_URL / OPENAI_API_KEY, the row as JSON on stdin. It ends
 * with the agent's last stdout line (its result), or with why it failed: a non-zero exit, a signal, the deadline.
 */
import { spawn } from "node:child_process";
import { ChildOutput } from "../process/output.js";
import { killGroup } from "../process/json-lines-host.js";
import { describeExit } from "../process/supervisor.js";

export interface AgentProcessSpec {
  /** argv: the program and its arguments. */
  argv: readonly string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** Written to stdin, then stdin is closed. */
  input: string;
  /** The trajectory's deadline: the whole process group is killed when it fires. */
  signal: AbortSignal;
}

export type AgentProcessOutcome =
  | { ok: true; lastLine: string | undefined }
  | { ok: false; error: string };

// Enough for an uncaught exception's message to outlive its stack frames (errorLine skips them).
const STDERR_TAIL = 40;

export function runAgentProcess(spec: AgentProcessSpec): Promise<AgentProcessOutcome> {
  return new Promise((resolve) => {
    if (spec.signal.aborted) return resolve({ ok: false, error: "the deadline passed before the agent started" });
    const child = spawn(spec.argv[0]!, spec.argv.slice(1), { cwd: spec.cwd, env: spec.env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
    let lastLine: string | undefined;
    const stdout = new ChildOutput({ tailLines: 1, onLine: (line) => void (line.trim() !== "" && (lastLine = line.trim())) });
    const stderr = new ChildOutput({ tailLines: STDERR_TAIL });
    stdout.capture(child.stdout);
    stderr.capture(child.stderr);
    let killedAtDeadline = false;
    const onDeadline = () => {
      killedAtDeadline = true;
      if (child.pid !== undefined) killGroup(child.pid);
    };
    spec.signal.addEventListener("abort", onDeadline, { once: true });
    // An agent that never reads its row closes stdin early: that is its business, not an error.
    child.stdin.on("error", () => undefined);
    child.stdin.end(spec.input);
    let spawnError: Error | undefined;
    child.on("error", (err) => (spawnError = err));
    child.on("close", (code, signal) => {
      spec.signal.removeEventListener("abort", onDeadline);
      // What it left running (a server it started, a grandchild) goes with it.
      if (child.pid !== undefined) killGroup(child.pid);
      stdout.end();
      stderr.end();
      if (spawnError) return resolve({ ok: false, error: `cannot start ${spec.argv[0]}: ${spawnError.message}` });
      if (killedAtDeadline) return resolve({ ok: false, error: "killed at the trajectory's deadline" });
      if (code === 0) return resolve({ ok: true, lastLine });
      const tail = errorLine(stderr.lastLines());
      resolve({ ok: false, error: `${describeExit({ code, signal })}${tail ? `: ${tail}` : ""}` });
    });
  });
}

/**
 * The line of an agent's stderr tail that says what went wrong: the last one, but not the version line Node prints
 * after an uncaught exception's stack, nor the stack's `at ...` frames.
 */
export function errorLine(lines: readonly string[]): string | undefined {
  const meaningful = lines.filter((line) => !/^Node\.js v\d/.test(line.trim()) && !/^\s+at /.test(line));
  return meaningful.at(-1)?.trim();
}
