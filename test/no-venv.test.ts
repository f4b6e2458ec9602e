/**
 * agentrl installed without the repository's .venv, as on a GPU box whose own Python has torch: the Python processes
 * it starts (here the training worker) run on python3 from PATH. The built CLI runs from a copy of the package that
 * has no .venv; python3 on PATH is a stand-in that records how it was called and exits, so no torch is imported.
 */
import { execFile } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { expect, it } from "vitest";
import { REPO_ROOT } from "./helpers/cli.js";
import { tempDir } from "./helpers/tmp.js";

const scratch = tempDir("no-venv");

it("agentrl sft without .venv starts its worker with python3 from PATH", async () => {
  const root = path.join(scratch, "agentrl");
  mkdirSync(path.join(root, "dist"), { recursive: true });
  cpSync(path.join(REPO_ROOT, "package.json"), path.join(root, "package.json"));
  cpSync(path.join(REPO_ROOT, "bin"), path.join(root, "bin"), { recursive: true });
  // Copied, not linked: Node resolves a linked module to its real path, which is the checkout with its .venv.
  cpSync(path.join(REPO_ROOT, "dist", "bundle"), path.join(root, "dist", "bundle"), { recursive: true });
  for (const shared of ["node_modules", "worker"]) symlinkSync(path.join(REPO_ROOT, shared), path.join(root, shared));

  const bin = path.join(scratch, "bin");
  mkdirSync(bin);
  const calls = path.join(scratch, "python3-calls.txt");
  writeFileSync(path.join(bin, "python3"), `#!/bin/sh\necho "$@" >> "${calls}"\nexit 3\n`);
  chmodSync(path.join(bin, "python3"), 0o755);

  const run = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [path.join(root, "bin", "agentrl.js"), "sft", "--config", "examples/cpu-demo-sft.yaml", "--steps", "1", "--quiet", "--set", `trainer.default_local_dir=${path.join(scratch, "run")}`],
      { cwd: REPO_ROOT, env: { ...process.env, PATH: `${bin}${path.delimiter}${process.env.PATH}`, NO_COLOR: "1" }, timeout: 60_000 },
      (err, _stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stderr }),
    );
  });
  expect(run.stderr).not.toMatch(/ENOENT/);
  expect(readFileSync(calls, "utf8")).toMatch(/^-m agentrl_worker --socket /m);
  // The stand-in exits at once: the worker's start-up failure, reported as such.
  expect(run.code, run.stderr).toBe(1);
  expect(run.stderr).toMatch(/worker/);
});
