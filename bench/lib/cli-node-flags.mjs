/**
 * The V8 flags `agentrl` runs with when started as a program: bin/agentrl.js's shell launcher execs Node with them.
 * A benchmark of the CLI's own code calls relaunchWithCliNodeFlags() first, so it measures the heap the CLI runs on.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The flags of the launcher's `exec node ... "$0" "$@"` line. */
export function cliNodeFlags() {
  const launcher = readFileSync(path.join(root, "bin/agentrl.js"), "utf8");
  const line = launcher.split("\n").findLast((l) => /^exec node .*"\$0" "\$@"$/.test(l));
  if (!line) throw new Error("bin/agentrl.js: no `exec node ... \"$0\" \"$@\"` launcher line");
  return line.slice("exec node ".length, line.indexOf('"$0"')).trim().split(/\s+/).filter(Boolean);
}

/**
 * Re-runs this script under the CLI's flags unless it already has them; returns only in the process that has them.
 * BENCH_CLI_FLAGS=0 keeps V8's defaults (what `node bin/agentrl.js` runs with), for a side-by-side.
 */
export function relaunchWithCliNodeFlags() {
  if (process.env.BENCH_CLI_FLAGS === "0") return;
  const flags = cliNodeFlags();
  if (flags.every((flag) => process.execArgv.includes(flag))) return;
  const run = spawnSync(process.execPath, [...flags, ...process.execArgv, ...process.argv.slice(1)], { stdio: "inherit" });
  process.exit(run.status ?? 1);
}
