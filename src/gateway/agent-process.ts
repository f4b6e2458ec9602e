/**
 * One run of a user's OpenAI-API agent as a process, started by the registry's agent launcher (agent-launcher.ts):
 * its own process group (so a kill reaches whatever it started), the gateway's base URL and key in OPENAI_BASE_URL /
 * OPENAI_API_KEY, the row as JSON on stdin. It ends with the agent's last stdout line (its result), or with why it
 * failed: a non-zero exit, a signal, the deadline, a program that cannot start.
 */
import { describeExit } from "../process/supervisor.js";
import type { AgentLauncher } from "./agent-launcher.js";

export interface AgentProcessSpec {
  /** Starts the process, and kills its process group when it exits or at the deadline. */
  launcher: AgentLauncher;
  /** argv: the program and its arguments. */
  argv: readonly string[];
  /** Its whole environment. */
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

export async function runAgentProcess(spec: AgentProcessSpec): Promise<AgentProcessOutcome> {
  const { launcher, signal, ...agent } = spec;
  if (signal.aborted) return { ok: false, error: "the deadline passed before the agent started" };
  const reply = await launcher.run(agent, signal);
  if ("lost" in reply) return { ok: false, error: reply.lost };
  // The deadline's cancel went out before the reply came: however the launcher saw it end, the deadline ended it.
  if (signal.aborted) return { ok: false, error: "killed at the trajectory's deadline" };
  if (!reply.ok) return { ok: false, error: `cannot start ${spec.argv[0]}: ${reply.error ?? "unknown error"}` };
  if (reply.code === 0) return { ok: true, lastLine: reply.last_line ?? undefined };
  const tail = errorLine(reply.stderr_tail ?? []);
  const exit = { code: reply.code ?? null, signal: (reply.signal ?? null) as NodeJS.Signals | null };
  return { ok: false, error: `${describeExit(exit)}${tail ? `: ${tail}` : ""}` };
}

/**
 * The line of an agent's stderr tail that says what went wrong: the last one, but not the version line Node prints
 * after an uncaught exception's stack, nor the stack's `at ...` frames.
 */
export function errorLine(lines: readonly string[]): string | undefined {
  const meaningful = lines.filter((line) => !/^Node\.js v\d/.test(line.trim()) && !/^\s+at /.test(line));
  return meaningful.at(-1)?.trim();
}
