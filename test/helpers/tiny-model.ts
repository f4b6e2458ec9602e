/**
 * A tiny random-init Qwen model with the real Qwen3 tokenizer, made once per machine by `agentrl_worker.make_tiny`
 * and shared by the tests that need a real model (built in a temporary folder, then renamed into place, so
 * concurrent test files never see half a model).
 */
import { existsSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { REPO_ROOT } from "./cli.js";
import { runPython } from "./python.js";
import { QWEN3_DIR } from "./qwen3.js";

export function tinyQwenModel(options: { layers?: number; hidden?: number; seed?: number } = {}): string {
  const { layers = 1, hidden = 32, seed = 0 } = options;
  const target = path.join(os.tmpdir(), `agentrl-test-tiny-qwen3-l${layers}-h${hidden}-s${seed}`);
  if (existsSync(path.join(target, "model.safetensors"))) return target;
  const temp = mkdtempSync(`${target}.tmp-`);
  const made = runPython(
    ["-m", "agentrl_worker.make_tiny", "--tokenizer", QWEN3_DIR, "--layers", String(layers), "--hidden", String(hidden), "--seed", String(seed), "--out", temp],
    { cwd: path.join(REPO_ROOT, "worker") },
  );
  if (made.code !== 0) throw new Error(`make_tiny failed:\n${made.stderr}`);
  try {
    renameSync(temp, target);
  } catch {
    rmSync(temp, { recursive: true, force: true }); // another test file made it first
  }
  return target;
}
