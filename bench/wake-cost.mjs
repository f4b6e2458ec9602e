#!/usr/bin/env node
/**
 * What a wake-up costs a Node process on this machine: the same small unit of work run back to back, and run once
 * after each sleep of 1, 5 and 20 ms, as a server that waits on other processes runs its work. Two units: JSON of a
 * 100-message list (about 150 µs, the kind of work a rollout turn does), and a walk over 4 MB of memory, one read
 * per 64-byte cache line (no allocation, no JIT work: what is left is the caches). Prints each unit's own median time
 * and the process CPU per unit (the sleep's wake-up included) for each gap. If the walk slows after a sleep as the
 * JSON does, the cost is the caches refilled after the CPU ran something else (on a VM, another tenant), not Node.
 * docs/benchmarks.md (the OpenAI gateway section) cites it: a gateway's CLI runs its turns in pieces between its
 * agents' requests and sleeps between them, about 2.4 times a turn against the built-in loop's once
 * (bench/gateway-overhead.mjs's `sleeps` column).
 *
 *   node bench/wake-cost.mjs [--units 1000]
 */
import { setTimeout as sleep } from "node:timers/promises";
import { median } from "./lib/table-format.mjs";

const i = process.argv.indexOf("--units");
const units = i >= 0 ? Number(process.argv[i + 1]) : 1000;
const messages = Array.from({ length: 100 }, (_, k) => ({ role: "user", content: `${"x".repeat(50)}${k}`, n: k }));
const memory = new Uint8Array(4 * 1024 * 1024).fill(1);
const WORK = {
  "JSON of 100 messages": () => {
    let n = 0;
    for (let k = 0; k < 3; k++) n += JSON.parse(JSON.stringify(messages)).length;
    return n;
  },
  "a 4 MB walk": () => {
    let n = 0;
    for (let k = 0; k < memory.length; k += 64) n += memory[k];
    return n;
  },
};

const rows = [];
for (const [name, work] of Object.entries(WORK)) {
  for (let k = 0; k < 2000; k++) work();
  for (const gapMs of [0, 1, 5, 20, 0]) {
    const times = [];
    const before = process.cpuUsage();
    for (let k = 0; k < units; k++) {
      const t0 = process.hrtime.bigint();
      work();
      times.push(Number(process.hrtime.bigint() - t0) / 1e3);
      await (gapMs > 0 ? sleep(gapMs) : null);
    }
    const cpu = process.cpuUsage(before);
    rows.push({ name, gapMs, workMedianUs: median(times), cpuPerUnitUs: (cpu.user + cpu.system) / units });
  }
}
console.log("## wake-cost.mjs: the same work back to back and after a sleep (one Node process)\n");
console.log("| work | gap before each unit | the work's median time | process CPU per unit |");
console.log("|---|---|---|---|");
for (const r of rows) console.log(`| ${r.name} | ${r.gapMs ? `${r.gapMs} ms sleep` : "none (back to back)"} | ${r.workMedianUs.toFixed(0)} µs | ${r.cpuPerUnitUs.toFixed(0)} µs |`);
