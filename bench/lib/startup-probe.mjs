/**
 * Start-up cost of a rollout, run as its own process by rollout-overhead.mjs: `node startup-probe.mjs URL` loads
 * what `agentrl rollout` loads (modules, Qwen3 tokenizer and template, tool config, parser), opens the trajectory
 * writer, starts runRollout and prints, as one JSON line, this process's CPU time (Node's own start included) at
 * the moment the first /generate request is handed to the client.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

const url = process.argv[2];
const { contextFor, gsm8kPrompts, loadDist, parts, toolRollout } = await import("./gsm8k-tool-workload.mjs");
const { runRollout } = await loadDist("rollout/run-rollout.js");
const { makeClient } = await loadDist("rollout/setup.js");
const { openTrajectoryWriter } = await loadDist("data/trajectory-store.js");

const dir = mkdtempSync(path.join(os.tmpdir(), "agentrl-startup-"));
const config = toolRollout(1, { n: 1 });
config.server.urls = [url];
const client = makeClient(config, undefined);
let firstRequestCpuUs;
const tapped = new Proxy(client, {
  get(target, key) {
    const value = Reflect.get(target, key, target);
    if (typeof value !== "function") return value;
    if (key !== "generate") return value.bind(target);
    return (req) => {
      if (firstRequestCpuUs === undefined) {
        const cpu = process.cpuUsage();
        firstRequestCpuUs = cpu.user + cpu.system;
      }
      return value.call(target, req);
    };
  },
});
const writer = await openTrajectoryWriter(path.join(dir, "t.parquet"));
await runRollout({ prompts: gsm8kPrompts(1), n: 1, concurrency: 1, context: contextFor(tapped, config), writer });
await writer.close();
await client.close();
await parts.close();
rmSync(dir, { recursive: true, force: true });
process.stdout.write(`${JSON.stringify({ firstRequestCpuUs })}\n`);
