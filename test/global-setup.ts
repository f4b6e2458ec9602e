/**
 * Removes the suite's private temp folder when the suite ends. vitest.config.ts makes it and gives it to every test
 * worker, and so to every process a test starts (the CLI, the engine, torchrun and its ranks, Python's tempfile), as
 * TMPDIR: the suite leaves nothing in the machine's temp folder, even when a timeout kills a test before its own
 * clean-up runs.
 */
import { rmSync } from "node:fs";

export default function setup(): () => void {
  return () => {
    const root = process.env.AGENTRL_SUITE_TMP;
    if (root) rmSync(root, { recursive: true, force: true });
  };
}
