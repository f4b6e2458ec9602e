/**
 * The one Ctrl-C handler of long commands (rollout, train, sft): the first SIGINT or SIGTERM asks the command to stop
 * at its next safe point (a checkpoint, a finished file); a second one quits at once with 130, the shell's code for
 * an interrupt. Quitting is the entry point's job (bin/agentrl.js registers it with setQuitNow): nothing else in src/
 * ends the process.
 */
export interface Interrupt {
  signal: AbortSignal;
  dispose(): void;
}

/** Without an entry point (a library caller), the second signal is re-raised with the default action restored. */
let quitNow: (code: number) => void = () => {
  process.removeAllListeners("SIGINT");
  process.kill(process.pid, "SIGINT");
};

/** The entry point's way to end the process at once; bin/agentrl.js passes process.exit. */
export function setQuitNow(quit: (code: number) => void): void {
  quitNow = quit;
}

/** `what` completes "stopping: ..." (e.g. "finishing the current step and saving a checkpoint"). */
export function handleInterrupts(what: string): Interrupt {
  const stop = new AbortController();
  let interrupts = 0;
  const onSignal = () => {
    interrupts += 1;
    if (interrupts > 1) return quitNow(130);
    process.stderr.write(`\nstopping: ${what} (Ctrl-C again to quit now)\n`);
    stop.abort(new Error("interrupted"));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  return {
    signal: stop.signal,
    dispose() {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    },
  };
}
