/**
 * A tiny random-init Qwen model with the real Qwen3 tokenizer (or the CPU demo's), made once per test run by
 * `agentrl_worker.make_tiny` and shared by the test files that need a real model. It lives in the suite's cache
 * folder (AGENTRL_SUITE_CACHE, vitest.config.ts), which goes with the suite, not in the temp folder each file must
 * leave empty. It is built in a temporary folder, then renamed into place, so concurrent test files never see half a
 * model.
 */
import { existsSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "./cli.js";
import { runPython, torchPythonEnv } from "./python.js";
import { QWEN3_DIR } from "./qwen3.js";
import { tempDir } from "./tmp.js";

/**
 * The tokenizers a tiny model can have. `demo`, the CPU demo's 64 tokens, is for a test about tensors rather than
 * text: with Qwen3's 151,936 tokens the embedding and the head are 4.9 million values each at hidden 32, which
 * dominate every comparison of whole weights.
 */
const TOKENIZER_DIRS = { qwen3: QWEN3_DIR, demo: path.join(REPO_ROOT, "examples", "cpu-demo", "model") };

export function tinyQwenModel(options: { layers?: number; hidden?: number; seed?: number; tokenizer?: keyof typeof TOKENIZER_DIRS } = {}): string {
  const { layers = 1, hidden = 32, seed = 0, tokenizer = "qwen3" } = options;
  // Outside vitest.config.ts (no suite cache), the model is the file's own and goes when the file ends.
  const cache = process.env.AGENTRL_SUITE_CACHE ?? tempDir("tiny-models");
  const target = path.join(cache, `agentrl-test-tiny-${tokenizer}-l${layers}-h${hidden}-s${seed}`);
  if (existsSync(path.join(target, "model.safetensors"))) return target;
  const temp = mkdtempSync(`${target}.tmp-`);
  const made = runPython(
    ["-m", "agentrl_worker.make_tiny", "--tokenizer", TOKENIZER_DIRS[tokenizer], "--layers", String(layers), "--hidden", String(hidden), "--seed", String(seed), "--out", temp],
    { cwd: path.join(REPO_ROOT, "worker"), env: torchPythonEnv() },
  );
  if (made.code !== 0) {
    rmSync(temp, { recursive: true, force: true });
    throw new Error(`make_tiny failed:\n${made.stderr}`);
  }
  try {
    renameSync(temp, target);
  } catch {
    rmSync(temp, { recursive: true, force: true }); // another test file made it first
  }
  return target;
}
