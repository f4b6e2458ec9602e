/**
 * The guardian: a few lines of Node that sit between agentrl and a child it supervises (an inference server, the
 * SGLang router) so that the child can never outlive agentrl, even when agentrl is killed with SIGKILL and runs no
 * exit handler.
 *
 * The supervisor (supervisor.ts) spawns `node -e GUARDIAN_SOURCE -- python ...` detached, so the guardian leads a new
 * process group; the child (and anything it forks, such as SGLang's scheduler processes) inherits that group. The
 * guardian holds the read end of a pipe whose write end only agentrl holds: when agentrl dies for any reason the
 * kernel closes it, the guardian reads end-of-file and takes the whole group down. A parent-pid poll backs this up.
 *
 * Shutting down: SIGTERM (or the signal agentrl forwarded) to the group, then SIGKILL to the group after the grace
 * period if the child is still there. When the child exits by itself, leftover group members get SIGTERM and the
 * guardian exits with the child's status (128 + signal number for a signal).
 *
 * It is a source string run with `node -e` rather than a file so that it works the same from dist/ and under vitest.
 */
export const GUARDIAN_SOURCE = String.raw`
const { spawn } = require("node:child_process");
const { constants } = require("node:os");
const graceMs = Number(process.env.AGENTRL_GUARDIAN_GRACE_MS || "10000");
delete process.env.AGENTRL_GUARDIAN_GRACE_MS;
const [command, ...args] = process.argv.slice(1);
const group = process.pid;
const parent = process.ppid;
let stopping = false;
const child = spawn(command, args, { stdio: ["ignore", "inherit", "inherit"] });
const killGroup = (signal) => { try { process.kill(-group, signal); } catch {} };
const stop = (signal) => {
  if (stopping) return;
  stopping = true;
  killGroup(signal);
  setTimeout(() => killGroup("SIGKILL"), graceMs).unref();
};
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => stop(signal));
process.stdin.on("end", () => stop("SIGTERM"));
process.stdin.on("error", () => stop("SIGTERM"));
process.stdin.resume();
setInterval(() => { if (process.ppid !== parent) stop("SIGTERM"); }, 1000).unref();
child.on("error", (err) => {
  process.stderr.write("agentrl: cannot start " + command + ": " + err.message + "\n");
  process.exit(127);
});
child.on("exit", (code, signal) => {
  stopping = true;
  killGroup("SIGTERM");
  process.exit(code ?? 128 + (constants.signals[signal] || 0));
});
`;
