#!/usr/bin/env node
// The only place that exits the process: the CLI returns an exit code, this file applies it.
import { main, setQuitNow } from "../dist/cli/index.js";

// A second Ctrl-C during a long command quits at once (src/interrupt.ts).
setQuitNow((code) => process.exit(code));

// `agentrl inspect ... | head` closes stdout early: that is the reader's choice, not an error.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (err) => {
    if (err && err.code === "EPIPE") process.exit(process.exitCode ?? 0);
    throw err;
  });
}

main(process.argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(err && err.stack ? err.stack : String(err));
    process.exitCode = 1;
  },
);
