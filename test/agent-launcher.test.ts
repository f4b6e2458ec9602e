/**
 * Command agents through the agent launcher (src/gateway/agent-launcher.ts, worker/agentrl_worker/agent_launcher.py),
 * as the gateway runs them: runAgentProcess's outcomes (the last line, an exit code with the stderr line that says
 * why, a program that cannot start, the deadline), the launcher restarted after it dies, and closed with its registry.
 */
import { afterAll, describe, expect, it } from "vitest";
import { readdirSync, readFileSync } from "node:fs";
import { AgentLauncher } from "../src/gateway/agent-launcher.js";
import { runAgentProcess, type AgentProcessSpec } from "../src/gateway/agent-process.js";

const launcher = new AgentLauncher();
afterAll(() => launcher.close());

const ENV = { PATH: process.env["PATH"] ?? "/usr/bin:/bin" };

function run(script: string, options: Partial<AgentProcessSpec> = {}) {
  return runAgentProcess({ launcher, argv: ["/bin/sh", "-c", script], env: ENV, cwd: "/", input: "", signal: new AbortController().signal, ...options });
}

/** This process's children running the agent launcher (a scan of /proc). */
function launcherPids(): number[] {
  return readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number).filter((pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      return ppid === process.pid && readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("agentrl_worker.agent_launcher");
    } catch {
      return false;
    }
  });
}

describe("runAgentProcess through the agent launcher", () => {
  it("starts at load, once", async () => {
    await launcher.start("agent_loops.a");
    await launcher.start("agent_loops.b");
    expect(launcherPids()).toHaveLength(1);
  });

  it("gives the agent its row on stdin and its environment, and ends with its last stdout line", async () => {
    const outcome = await run('read row; echo "$GREETING $row"; echo', { input: "row-1\n", env: { ...ENV, GREETING: "hello" } });
    expect(outcome).toEqual({ ok: true, lastLine: "hello row-1" });
  });

  it("fails a non-zero exit with its code and the stderr line that says why, not Node's version line", async () => {
    const outcome = await run("echo 'Error: no answer' >&2; echo '    at main (agent.mjs:3:9)' >&2; echo >&2; echo 'Node.js v20.20.2' >&2; exit 3");
    expect(outcome).toEqual({ ok: false, error: "exit code 3: Error: no answer" });
    expect(await run("kill -9 $$")).toEqual({ ok: false, error: "signal SIGKILL" });
  });

  it("fails a program that cannot start", async () => {
    const outcome = await runAgentProcess({ launcher, argv: ["/no/such/agent"], env: ENV, cwd: "/", input: "", signal: new AbortController().signal });
    expect(outcome).toEqual({ ok: false, error: "cannot start /no/such/agent: No such file or directory (ENOENT)" });
  });

  it("kills the agent at the deadline", async () => {
    const started = Date.now();
    const outcome = await run("sleep 30", { signal: AbortSignal.timeout(200) });
    expect(outcome).toEqual({ ok: false, error: "killed at the trajectory's deadline" });
    expect(Date.now() - started).toBeLessThan(10_000);
    const aborted = AbortSignal.abort();
    expect(await run("true", { signal: aborted })).toEqual({ ok: false, error: "the deadline passed before the agent started" });
  });

  it("fails the agents of a launcher that dies, and starts it again for the next ones", async () => {
    // Its agent outlives it (nothing is left to kill its group): a short one.
    const running = run("sleep 3");
    await new Promise((resolve) => setTimeout(resolve, 300));
    const [pid] = launcherPids();
    process.kill(pid!, "SIGKILL");
    const outcome = await running;
    expect(outcome.ok).toBe(false);
    expect(!outcome.ok && outcome.error).toMatch(/^the agent launcher exited \(signal SIGKILL\); it is restarted for later trajectories$/);
    expect(await run("echo back")).toEqual({ ok: true, lastLine: "back" });
    expect(launcherPids()).not.toContain(pid);
  });

  it("is gone once closed", async () => {
    const other = new AgentLauncher();
    await other.start("agent_loops.c");
    expect(launcherPids()).toHaveLength(2);
    await other.close();
    expect(launcherPids()).toHaveLength(1);
  });
});
