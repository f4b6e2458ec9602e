/**
 * Removes the suite's private temp folder when the suite ends. vitest.config.ts makes it and gives it to every test
 * worker, and so to every process a test starts (the CLI, the engine, torchrun and its ranks, Python's tempfile), as
 * TMPDIR: the suite leaves nothing in the machine's temp folder, even when a timeout kills a test before its own
 * clean-up runs. What a test left there is listed first: each test is meant to remove what it creates, and the list
 * says which did not (AGENTRL_STRICT_TMP=1 turns it into a failure).
 */
import { readdirSync, rmSync } from "node:fs";

export default function setup(): () => void {
  return () => {
    const root = process.env.AGENTRL_SUITE_TMP;
    if (!root) return;
    const left = readdirSync(root, { withFileTypes: true }).map((entry) => entry.name);
    rmSync(root, { recursive: true, force: true });
    if (left.length === 0) return;
    const message = `tests left ${left.length} entries in their temp folder: ${left.slice(0, 20).join(", ")}${left.length > 20 ? ", ..." : ""}`;
    if (process.env.AGENTRL_STRICT_TMP === "1") throw new Error(message);
    process.stderr.write(`warning: ${message}\n`);
  };
}
