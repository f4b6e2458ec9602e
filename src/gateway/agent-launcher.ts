/**
 * Command agents are started by `python -m agentrl_worker.agent_launcher` (worker/agentrl_worker/agent_launcher.py),
 * one small long-lived process per agent loop registry, not by agentrl itself: node's spawn forks agentrl's whole
 * ~400 MB process, ~3.5 ms of its CPU per agent (the kernel copying page tables, then page faults as the copied pages
 * are touched again), where the launcher's subprocess uses vfork. It speaks the Python hosts' JSON lines
 * (docs/tool-host-protocol.md, "Agent launcher"), starts with the first command agent at load, watches agentrl's pid,
 * and is restarted when it dies. It runs unsandboxed: a `sandbox: bwrap` agent's argv is already bubblewrap's.
 */
import { z } from "zod";
import { InputError } from "../errors.js";
import { RestartingHost, type HostHello, type Launch } from "../process/index.js";
import { startPythonHost, toolHostConfigSchema } from "../tools/index.js";
import { RunHostProcess, type HostLost } from "./run-host.js";

const LABEL = "the agent launcher";

const replySchema = z.object({
  id: z.number().int(),
  ok: z.boolean(),
  last_line: z.string().nullable().optional(),
  code: z.number().int().nullable().optional(),
  signal: z.string().nullable().optional(),
  stderr_tail: z.array(z.string()).optional(),
  kind: z.string().optional(),
  error: z.string().optional(),
});
/** How an agent ended (`ok`), or why it did not start. */
export type LauncherReply = z.infer<typeof replySchema>;

/** One agent to run: its whole environment (the launcher's own is not inherited), the row on stdin. */
export interface AgentRun {
  argv: readonly string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  input: string;
}

class LauncherProcess extends RunHostProcess<LauncherReply> {
  /** Runs one agent until it exits; at the deadline the launcher kills its process group. */
  run(agent: AgentRun, signal: AbortSignal): Promise<LauncherReply | HostLost> {
    return this.runRequest({ argv: agent.argv, env: agent.env, cwd: agent.cwd, input: agent.input }, signal);
  }
}

/** The launcher of one registry's command agents; `close` ends it, and the agents it still runs. */
export class AgentLauncher {
  private readonly host = new RestartingHost<LauncherProcess>(LABEL, (onDead) => startLauncher(onDead));

  /** Starts it now (once), so that a launcher that cannot start fails the run at load, naming `where`. */
  async start(where: string): Promise<void> {
    try {
      await this.host.get();
    } catch (err) {
      throw new InputError(`${where}: ${(err as Error).message}`, {
        hint: "agentrl starts command agents through a small Python process: it needs Python 3 (the repository's .venv, else python3 on PATH)",
        cause: err,
      });
    }
  }

  async run(agent: AgentRun, signal: AbortSignal): Promise<LauncherReply | HostLost> {
    let host: LauncherProcess;
    try {
      host = await this.host.get();
    } catch (err) {
      return { lost: (err as Error).message };
    }
    return host.run(agent, signal);
  }

  close(): Promise<void> {
    return this.host.close();
  }
}

function startLauncher(onDead: () => void): Promise<LauncherProcess> {
  // No address-space or file-size limit: the agents inherit the launcher's.
  const host = toolHostConfigSchema.parse({ sandbox: "none", memory_limit_mb: null, max_file_size_mb: null });
  return startPythonHost(
    { module: "agent_launcher", args: [], paths: [], host },
    (launch: Launch) => new LauncherProcess(launch, { label: LABEL, stderrPrefix: "agent launcher" }, onDead, LABEL, replySchema),
    LABEL,
    (python: string, hello: HostHello, stderr: string) => new Error(`cannot start ${LABEL} with ${python}: ${[hello.error, stderr].filter(Boolean).join(": ")}`),
  );
}
