/**
 * Where agentrl's own files are: the package root, the nearest folder above this module that holds package.json and
 * worker/. Found by walking up rather than by a fixed depth, because this module runs from src/ (vitest), from dist/
 * (tsc's files) and from inside the CLI's bundle (dist/bundle/, scripts/bundle.mjs).
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

function packageRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, "package.json")) && existsSync(path.join(dir, "worker"))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`agentrl: no package root (package.json and worker/) above ${from}`);
  }
}

export const REPO_ROOT = packageRoot(path.dirname(fileURLToPath(import.meta.url)));
/** agentrl's version, from its package.json. */
export function packageVersion(): string {
  version ??= (JSON.parse(readFileSync(path.join(REPO_ROOT, "package.json"), "utf8")) as { version: string }).version;
  return version;
}
let version: string | undefined;
/** The folder holding the agentrl_worker package (put on PYTHONPATH). */
export const WORKER_DIR = path.join(REPO_ROOT, "worker");
/** The interpreter scripts/install.sh sets up, with torch and the worker's dependencies. */
export const VENV_PYTHON = path.join(REPO_ROOT, ".venv", "bin", "python");

/** The repository's .venv/bin/python when it exists, else python3 (looked up on PATH). */
export function defaultPythonExecutable(): string {
  return existsSync(VENV_PYTHON) ? VENV_PYTHON : "python3";
}
