#!/usr/bin/env node
// CLI start-up: the same commands run from the bundle bin/agentrl.js loads (dist/bundle/, scripts/bundle.mjs) and from
// tsc's module-per-file dist/cli/index.js, alternating, in one run. Each command does little besides starting: its
// time is what the module loading costs every command. CPU is the child's own user + system time
// (process.resourceUsage at its end), wall the whole process. Prints a markdown section; needs `npm run build` first.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const runs = Number(process.env.BENCH_RUNS ?? 7);
const scratch = mkdtempSync(path.join(os.tmpdir(), "agentrl-bench-cli-"));
const entries = {
  bundle: path.join(root, "dist", "bundle", "agentrl.mjs"),
  modules: path.join(root, "dist", "cli", "index.js"),
};
const commands = [
  ["--help"],
  ["train", "--config", path.join(scratch, "missing.yaml")],
  ["inspect", path.join(scratch, "missing.parquet")],
  ["train", "--config", path.join(root, "examples", "cpu-demo.yaml"), "--dry-run"],
];
// Runs the CLI entry in a child and prints that child's CPU seconds (user + system, from process.resourceUsage).
const runner = path.join(scratch, "runner.mjs");
writeFileSync(
  runner,
  `const { main } = await import(process.argv[2]);
const code = await main(["node", "agentrl", ...process.argv.slice(3)]);
const u = process.resourceUsage();
process.stderr.write("\\nCPU " + ((u.userCPUTime + u.systemCPUTime) / 1e6) + "\\n");
process.exit(code);`,
);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows = [];
try {
  for (const argv of commands) {
    const time = { bundle: { wall: [], cpu: [] }, modules: { wall: [], cpu: [] } };
    for (let i = 0; i < runs; i++) {
      for (const kind of ["bundle", "modules"]) {
        const start = process.hrtime.bigint();
        const child = spawnSync(process.execPath, [runner, entries[kind], ...argv], { cwd: root, encoding: "utf8" });
        time[kind].wall.push(Number(process.hrtime.bigint() - start) / 1e9);
        const cpu = /\nCPU ([0-9.]+)\n/.exec(child.stderr);
        if (!cpu) throw new Error(`no CPU line from ${kind} ${argv.join(" ")}: ${child.stderr.slice(-500)}`);
        time[kind].cpu.push(Number(cpu[1]));
      }
    }
    const label = argv.map((a) => (a.startsWith(root) || a.startsWith(scratch) ? path.basename(a) : a)).join(" ");
    const [b, m] = [time.bundle, time.modules];
    rows.push(
      `| \`agentrl ${label}\` | ${median(m.cpu).toFixed(3)} s | ${median(b.cpu).toFixed(3)} s | ${(median(m.cpu) / median(b.cpu)).toFixed(2)}× | ${median(m.wall).toFixed(3)} s | ${median(b.wall).toFixed(3)} s |`,
    );
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
console.log(`## cli-startup.mjs

CLI start-up, module per file (tsc's dist/) against the bundle bin/agentrl.js runs (scripts/bundle.mjs), median of
${runs} alternating runs each. CPU counts the Node process's user and system time, in-process module loading included.

| command | CPU, modules | CPU, bundle | modules / bundle | wall, modules | wall, bundle |
|---|---|---|---|---|---|
${rows.join("\n")}`);
