/**
 * Imported first by a benchmark of the CLI's own code: re-runs the benchmark under the V8 flags `agentrl` runs with
 * (bin/agentrl.js's launcher) before anything else loads, so it measures the heap the CLI runs on.
 */
import { relaunchWithCliNodeFlags } from "./cli-node-flags.mjs";

relaunchWithCliNodeFlags();
