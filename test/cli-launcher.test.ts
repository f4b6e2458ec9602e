/**
 * bin/agentrl.js run as a program (as `agentrl` on the PATH runs) is a shell launcher first: it execs Node on itself
 * with a 128 MB young-generation semi-space (docs/benchmarks.md), in the same process, and leaves a
 * --max-semi-space-size the user put in NODE_OPTIONS alone. A `node` earlier on the PATH records how it was started
 * (its arguments and process id) and then execs the real Node.
 */
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import { CLI, REPO_ROOT } from "./helpers/cli.js";
import { tempDir } from "./helpers/tmp.js";

const dir = tempDir("launcher");
const record = path.join(dir, "started");
writeFileSync(
  path.join(dir, "node"),
  `#!/bin/sh\nprintf '%s\\n' "$$" "$@" > '${record}'\nexec '${process.execPath}' "$@"\n`,
  { mode: 0o755 },
);
const version = (JSON.parse(readFileSync(path.join(REPO_ROOT, "package.json"), "utf8")) as { version: string }).version;

function runProgram(args: string[], env: NodeJS.ProcessEnv = {}) {
  return new Promise<{ code: number | null; stdout: string; stderr: string; pid: number | undefined; started: string[] }>((resolve) => {
    const child = execFile(CLI, args, { env: { ...process.env, PATH: `${dir}:${process.env.PATH}`, ...env } }, (err, stdout, stderr) => {
      const [pid, ...argv] = readFileSync(record, "utf8").trimEnd().split("\n");
      resolve({ code: err ? (err as { code?: number }).code ?? null : 0, stdout, stderr, pid: child.pid, started: [pid!, ...argv] });
    });
  });
}

it("execs Node on itself with the larger young generation, in the same process", async () => {
  const run = await runProgram(["--version"], { NODE_OPTIONS: "" });
  expect(run.stdout.trim()).toBe(version);
  expect(run.started).toEqual([String(run.pid), "--max-semi-space-size=128", CLI, "--version"]);
});

it("passes the CLI's exit code and arguments through unchanged", async () => {
  const run = await runProgram(["rollout", "--data", path.join(dir, "no such file.parquet"), "--model", "x", "--out", path.join(dir, "o.parquet")]);
  expect(run.code).toBe(2);
  expect(run.stderr).toContain("no such file.parquet");
  expect(run.started.slice(2)).toEqual([CLI, "rollout", "--data", path.join(dir, "no such file.parquet"), "--model", "x", "--out", path.join(dir, "o.parquet")]);
});

it("leaves the young generation to a --max-semi-space-size in NODE_OPTIONS", async () => {
  const run = await runProgram(["--version"], { NODE_OPTIONS: "--max-semi-space-size=32" });
  expect(run.stdout.trim()).toBe(version);
  expect(run.started).toEqual([String(run.pid), CLI, "--version"]);
});
