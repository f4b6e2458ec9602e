#!/bin/sh
":" /*
# Run as a program (`agentrl ...` on the PATH, `./bin/agentrl.js`), this file is a shell script first: it replaces
# itself (exec: same process id, so signals and exit codes are Node's) with Node running this same file, with a larger
# young generation. A rollout allocates about 150 KB of short-lived objects per turn; with V8's default 16 MB
# semi-space the scavenger runs every ~90 turns and copies every trajectory in flight each time. At 128 MB it runs an
# eighth as often: at 256 in flight 12–17% less client CPU per turn than at
# 64 MB (docs/benchmarks.md, bench/young-generation.mjs), with no larger peak RSS measured there; the young
# generation may grow to ~250 MB where a run keeps allocating.
# A --max-semi-space-size in NODE_OPTIONS is the user's choice and wins. Run as `node bin/agentrl.js`, Node reads the
# line above as a string and this block as a comment, and V8's defaults apply.
case " $NODE_OPTIONS " in
  *--max-semi-space-size*) exec node "$0" "$@" ;;
esac
exec node --max-semi-space-size=128 "$0" "$@"
*/
// The only place that exits the process: the CLI returns an exit code, this file applies it. It runs the CLI bundled
// (scripts/bundle.mjs: about 0.2 s less start-up for every command), with source maps on, so that the stack of an
// unexpected error names src/*.ts lines rather than the bundle's (about 0.02 s). tsc's module-per-file CLI does the
// same work: it runs when there is no bundle (a checkout built by tsc alone), or with AGENTRL_UNBUNDLED=1 (while
// `tsc --watch` rebuilds dist/ and the bundle would be stale).
import { existsSync } from "node:fs";

process.setSourceMapsEnabled(true);
const bundle = new URL("../dist/bundle/agentrl.mjs", import.meta.url);
const unbundled = process.env.AGENTRL_UNBUNDLED === "1" || !existsSync(bundle);
const { main, setQuitNow } = await import(unbundled ? "../dist/cli/index.js" : bundle.href);

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
