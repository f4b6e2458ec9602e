/**
 * Ctrl-C for long commands (train, sft): the first SIGINT or SIGTERM asks the loop to stop at its next safe point
 * (it saves a checkpoint); a second one quits at once with 130, the shell's code for an interrupt.
 */
export interface Interrupt {
  signal: AbortSignal;
  dispose(): void;
}

export function handleInterrupts(what: string): Interrupt {
  const stop = new AbortController();
  let interrupts = 0;
  const onSignal = () => {
    interrupts += 1;
    if (interrupts > 1) process.exit(130);
    process.stderr.write(`\nstopping: ${what} (Ctrl-C again to quit now)\n`);
    stop.abort();
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
