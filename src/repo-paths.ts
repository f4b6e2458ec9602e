/**
 * Where agentrl's own files are: the repository (or installed package) root, found from this module's place in the
 * tree. src/ and dist/ both sit one level below the root, so the same line serves vitest and the built CLI.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
/** The folder holding the agentrl_worker package (put on PYTHONPATH). */
export const WORKER_DIR = path.join(REPO_ROOT, "worker");
/** The interpreter scripts/install.sh sets up, with torch and the worker's dependencies. */
export const VENV_PYTHON = path.join(REPO_ROOT, ".venv", "bin", "python");

/** The repository's .venv/bin/python when it exists, else python3 (looked up on PATH). */
export function defaultPythonExecutable(): string {
  return existsSync(VENV_PYTHON) ? VENV_PYTHON : "python3";
}
