#!/usr/bin/env node
/**
 * What a wake-up costs a Node process on this machine: the same small unit of work (JSON of a 100-message list,
 * about 150 µs) run back to back, and run once after each sleep of 1, 5 and 20 ms, as a server that waits on other
 * processes runs its work. Prints the work's own median time and the process CPU per unit (the sleep's wake-up
 * included) for each gap. docs/benchmarks.md (the OpenAI gateway section) cites it: a gateway's CLI runs its turns in
 * pieces between its agents' requests, the built-in loop's back to back.
 *
 *   node bench/wake-cost.mjs [--units 1000]
 */
import { setTimeout as sleep } from "node:timers/promises";
import { median } from "./lib/table-format.mjs";

const i = process.argv.indexOf("--units");
const units = i >= 0 ? Number(process.argv[i + 1]) : 1000;
const messages = Array.from({ length: 100 }, (_, k) => ({ role: "user", content: `${"x".repeat(50)}${k}`, n: k }));
const work = () => {
  let n = 0;
  for (let k = 0; k < 3; k++) n += JSON.parse(JSON.stringify(messages)).length;
  return n;
};
for (let k = 0; k < 2000; k++) work();

const rows = [];
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
  rows.push({ gapMs, workMedianUs: median(times), cpuPerUnitUs: (cpu.user + cpu.system) / units });
}
console.log("## wake-cost.mjs: the same work back to back and after a sleep (one Node process)\n");
console.log("| gap before each unit | the work's median time | process CPU per unit |");
console.log("|---|---|---|");
for (const r of rows) console.log(`| ${r.gapMs ? `${r.gapMs} ms sleep` : "none (back to back)"} | ${r.workMedianUs.toFixed(0)} µs | ${r.cpuPerUnitUs.toFixed(0)} µs |`);
