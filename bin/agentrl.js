#!/usr/bin/env node
// The only place that exits the process: the CLI returns an exit code, this file applies it.
import { main } from "../dist/cli/index.js";

main(process.argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(err && err.stack ? err.stack : String(err));
    process.exitCode = 1;
  },
);
