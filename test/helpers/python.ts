/** Runs Python snippets with the project's virtual environment (.venv), for cross-checks against pyarrow & co. */
import { spawnSync } from "node:child_process";
import { torchProcessEnv } from "../../src/torch-threads.js";
import { VENV_PYTHON, REPO_ROOT } from "./cli.js";

/**
 * The environment for a Python program that imports torch (make_tiny, export_lora): agentrl's thread and malloc
 * settings, as the CLI gives the worker and the engine. The suite's warm-start server has them
 * (test/warm-start-server.ts), so such a start is forked instead of importing torch again.
 */
export function torchPythonEnv(): NodeJS.ProcessEnv {
  return { ...process.env, ...torchProcessEnv() };
}

export function runPython(
  args: string[],
  options: { input?: string; cwd?: string; env?: NodeJS.ProcessEnv } = {},
): { code: number; stdout: string; stderr: string } {
  const result = spawnSync(VENV_PYTHON, args, {
    cwd: options.cwd ?? REPO_ROOT,
    env: options.env ?? process.env,
    input: options.input ?? "",
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  return { code: result.status ?? 1, stdout: result.stdout, stderr: result.stderr };
}

/** Runs `code` with python -c and parses its stdout as JSON; throws with stderr when it fails. */
export function pythonJson<T = unknown>(code: string, args: string[] = []): T {
  const result = runPython(["-c", code, ...args]);
  if (result.code !== 0) throw new Error(`python failed (${result.code}):\n${result.stderr}`);
  return JSON.parse(result.stdout) as T;
}
