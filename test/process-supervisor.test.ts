/**
 * The child-process supervisor's account of how a child ended: a signal agentrl did not send is said in the child's
 * log tail (a process killed by a signal prints nothing itself), and a stop agentrl asked for is not.
 */
import { expect, it } from "vitest";
import { superviseProcess } from "../src/process/index.js";
import { WorkerError } from "../src/errors.js";

async function startIdleChild() {
  return superviseProcess({
    label: "the test child",
    command: process.execPath,
    args: ["-e", "console.log('up'); setInterval(() => {}, 1000)"],
    orphanGuard: "watches-parent",
    stopSignal: "SIGTERM",
    graceMs: 2_000,
    ready: (child) =>
      new Promise<void>((resolve) => {
        const poll = setInterval(() => {
          if (child.logTail().includes("up")) resolve(clearInterval(poll));
        }, 10);
      }),
    awaits: "print up",
    startupTimeoutMs: 30_000,
    startError: WorkerError,
  });
}

it("a SIGKILL from outside is named in the log tail, with the out-of-memory killer as a likely sender", async () => {
  const { child } = await startIdleChild();
  process.kill(child.pid, "SIGKILL");
  const exit = await child.exited;
  expect(exit).toMatchObject({ signal: "SIGKILL", requested: false });
  expect(child.logTail()).toEqual([
    "up",
    `agentrl: the test child (pid ${child.pid}) was ended by SIGKILL, which agentrl did not send (Linux's out-of-memory killer sends SIGKILL: see \`dmesg\`)`,
  ]);
});

it("a stop agentrl asked for adds nothing to the log tail", async () => {
  const { child } = await startIdleChild();
  const exit = await child.stop();
  expect(exit).toMatchObject({ signal: "SIGTERM", requested: true });
  expect(child.logTail()).toEqual(["up"]);
});
