#!/usr/bin/env node
// Runs every benchmark in bench/ and writes their markdown sections, with the machine and commit, to docs/benchmarks.md.
// `npm run bench -- long-tail over-sample` runs only the scripts whose names contain those words and prints them.
import { execSync, spawnSync } from "node:child_process";
import { writeFileSync, readdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const only = process.argv.slice(2);
const scripts = readdirSync(path.join(root, "bench"))
  .filter((f) => (f.endsWith(".mjs") || f.endsWith(".py")) && f !== "run.mjs")
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort();
const commit = (() => {
  try {
    return execSync("git rev-parse --short HEAD", { cwd: root, encoding: "utf8" }).trim();
  } catch {
    return "unknown";
  }
})();
const sections = [];
for (const script of scripts) {
  process.stderr.write(`==> ${script}\n`);
  const cmd = script.endsWith(".py") ? path.join(root, ".venv/bin/python") : process.execPath;
  const result = spawnSync(cmd, [path.join(root, "bench", script)], { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, PYTHONPATH: path.join(root, "worker") } });
  const output = result.stdout.trim();
  if (result.status !== 0) sections.push(`## ${script}\n\nfailed with exit code ${result.status}`);
  // Scripts that print plain text get a heading and a code block, so the page stays readable.
  else sections.push(output.startsWith("## ") ? output : `## ${script}\n\n\`\`\`\n${output}\n\`\`\``);
}
const header = `# Benchmarks

Produced by \`npm run bench\` (bench/run.mjs). Every ratio is measured side by side in one run on the same machine.

- machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? "cpu"}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.platform()} ${os.release()}
- node ${process.version}; commit ${commit}; ${new Date().toISOString().slice(0, 10)}
`;
if (only.length > 0) {
  // A partial run would drop the other tables from the page: print it instead.
  process.stdout.write(`${sections.join("\n\n")}\n`);
  process.stderr.write(`printed ${sections.length} section(s); docs/benchmarks.md is written only by a full run\n`);
} else {
  writeFileSync(path.join(root, "docs/benchmarks.md"), `${header}\n${sections.join("\n\n")}\n`);
  process.stderr.write(`wrote docs/benchmarks.md (${sections.length} sections)\n`);
}
