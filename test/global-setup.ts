/**
 * Removes the suite's private folder when the suite ends. vitest.config.ts makes it and gives its `tmp` to every test
 * worker, and so to every process a test starts (the CLI, the engine, torchrun and its ranks, Python's tempfile), as
 * TMPDIR: the suite leaves nothing in the machine's temp folder, even when a timeout kills a test before its own
 * clean-up runs. Each test file removes what it creates there (test/helpers/tmp.ts), including what the processes it
 * starts leave; anything still there at the end fails the run, with the list of what was left.
 */
import { existsSync, readdirSync, rmSync } from "node:fs";
import { suiteEnv } from "./suite-env.js";
import { startWarmStartServer, warmStartSocket } from "./warm-start-server.js";

export default function setup(): () => void {
  const root = process.env.AGENTRL_SUITE_ROOT;
  const socket = root ? warmStartSocket(root) : undefined;
  const warmStart = root && socket ? startWarmStartServer(socket, suiteEnv(root)) : undefined;
  return () => {
    warmStart?.kill("SIGTERM");
    const tmp = process.env.AGENTRL_SUITE_TMP;
    if (!root || !tmp) return;
    const left = existsSync(tmp) ? readdirSync(tmp) : [];
    rmSync(root, { recursive: true, force: true });
    if (left.length === 0) return;
    // vitest only logs an error thrown here ("error during close") and keeps the exit status: set it too.
    process.exitCode = 1;
    throw new Error(
      `tests left ${left.length} entries in their temp folder (each test file must remove what it creates, ` +
        `see test/helpers/tmp.ts): ${left.slice(0, 20).join(", ")}${left.length > 20 ? ", ..." : ""}`,
    );
  };
}
