/** Runs the built CLI as a user would: `node bin/agentrl.js ...` in a child process. */
import { spawn } from "node:child_process";
import path from "node:path";
import { REPO_ROOT } from "../../src/repo-paths.js";

export { REPO_ROOT, VENV_PYTHON } from "../../src/repo-paths.js";
export const CLI = path.join(REPO_ROOT, "bin", "agentrl.js");
export const SHARED = path.resolve(REPO_ROOT, "..", "shared");

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `prefix` runs the CLI under another command (e.g. setpriv, to drop root's permission override); `input` is written
 * to its stdin as given (bytes stay bytes).
 */
export function runCli(
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; input?: string | Uint8Array; timeoutMs?: number; prefix?: readonly string[] } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const [command, ...commandArgs] = [...(options.prefix ?? []), process.execPath, CLI, ...args];
    const child = spawn(command!, commandArgs, {
      cwd: options.cwd ?? REPO_ROOT,
      env: { ...process.env, NO_COLOR: "1", ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr });
    });
    child.stdin.end(options.input ?? "");
  });
}
