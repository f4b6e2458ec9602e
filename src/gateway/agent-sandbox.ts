/**
 * `sandbox: bwrap` for OpenAI-API agents: the agent's command inside bubblewrap, as the Python hosts run (system
 * paths, the working folder, the worker package and the interpreters read-only; a private writable scratch folder
 * and /tmp; its own PID namespace; killed with agentrl). Unlike the hosts it shares the network namespace: the
 * gateway listens on the host's loopback, and an agent that cannot reach it cannot run (docs/openai-gateway.md says
 * what that opens).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { InputError } from "../errors.js";
import { REPO_ROOT, WORKER_DIR } from "../repo-paths.js";
import { buildBwrapArgv, checkBwrap, probeInterpreter } from "../tools/sandbox.js";
import type { OpenaiAgentSpec } from "../rollout/config.js";

/** One launch of the agent: its argv and environment, and what to remove when it is done. */
export interface AgentLaunch {
  argv: string[];
  env: NodeJS.ProcessEnv;
  cleanup(): void;
}

/** Wraps `argv` for one trajectory: as it is (sandbox: none), or inside bubblewrap. */
export type AgentWrapper = (env: Record<string, string>) => AgentLaunch;

export async function agentWrapper(argv: readonly string[], spec: OpenaiAgentSpec, cwd: string, where: string): Promise<AgentWrapper> {
  if (spec.sandbox === "none") {
    // agentrl's environment as it is at load, copied once: reading process.env whole costs ~45 µs a time.
    const inherited = { ...process.env };
    return (env) => ({ argv: [...argv], env: { ...inherited, ...env }, cleanup: () => undefined });
  }
  const problem = await checkBwrap("bwrap");
  if (problem) throw new InputError(`${where}: sandbox: bwrap, but ${problem}`, { hint: "install bubblewrap, or set sandbox: none to run the agent as a plain child process" });
  const interpreters = /python/.test(path.basename(argv[0]!)) ? await probeInterpreter(argv[0]!).catch(() => []) : [];
  const readOnly = [path.resolve(cwd), REPO_ROOT, WORKER_DIR, path.dirname(path.dirname(process.execPath)), ...interpreters];
  return (env) => {
    const scratch = mkdtempSync(path.join(tmpdir(), "agentrl-agent-"));
    const inner: Record<string, string> = { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: scratch, LANG: "C.UTF-8", ...env };
    // bwrap starts in the scratch folder; the agent's command is written relative to the working folder.
    const command = ["/bin/sh", "-c", 'cd "$0" && exec "$@"', path.resolve(cwd), ...argv];
    const wrapped = buildBwrapArgv({ command, workDir: scratch, readOnly, env: inner, allowNetwork: true, tmpBytes: 256 * 1024 * 1024, asRoot: false });
    return {
      argv: ["bwrap", ...wrapped],
      env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin" },
      cleanup: () => rmSync(scratch, { recursive: true, force: true }),
    };
  };
}
