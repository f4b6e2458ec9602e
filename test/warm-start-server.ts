/**
 * The suite's warm-start server (worker/agentrl_worker/warm_start.py): one Python process that imports torch and
 * transformers once, then forks the training worker's ranks and the embedded engine that the tests' CLI runs start,
 * instead of each paying 6-12 s of CPU for the same imports. vitest.config.ts gives every test worker
 * AGENTRL_WARM_START (the socket's path), so every process a test starts inherits it; test/global-setup.ts starts the
 * server. A process that starts before the socket exists, or whose import-time environment differs from the
 * server's (a test that sets HF_HOME, say), starts cold as it would without the server: the server only changes how
 * long a start takes. AGENTRL_SUITE_COLD=1 runs the suite without it.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { MALLOC_SETTINGS } from "../src/torch-threads.js";

/**
 * The socket's path in the suite's folder, or undefined when the suite runs cold: on request, or when a long TMPDIR
 * would make the path longer than a Unix socket's address can hold (108 bytes on Linux).
 */
export function warmStartSocket(suiteRoot: string): string | undefined {
  const socket = path.join(suiteRoot, "warm-start.sock");
  return process.env.AGENTRL_SUITE_COLD === "1" || Buffer.byteLength(socket) > 100 ? undefined : socket;
}

/**
 * Starts the server with the import-time environment the suite's Python processes get: the test workers' variables
 * (`testEnv`) and the malloc settings agentrl gives torch processes. It exits when this process does.
 */
export function startWarmStartServer(socket: string, testEnv: Record<string, string>): ChildProcess {
  const repo = path.resolve(import.meta.dirname, "..");
  const env: NodeJS.ProcessEnv = { ...process.env, ...testEnv, ...MALLOC_SETTINGS };
  delete env.AGENTRL_WARM_START;
  const server = spawn(
    path.join(repo, ".venv", "bin", "python"),
    ["-m", "agentrl_worker.warm_start", "--socket", socket, "--parent-pid", String(process.pid)],
    { cwd: path.join(repo, "worker"), env, stdio: ["ignore", "inherit", "inherit"] },
  );
  // Without the virtual environment the suite runs cold (and the tests that need Python say why).
  server.on("error", (err) => console.error(`warm start: the server did not start (${err.message}); the suite runs cold`));
  server.unref();
  return server;
}
