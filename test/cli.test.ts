import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT, runCli } from "./helpers/cli.js";

describe("agentrl CLI skeleton", () => {
  it("--help lists every command", async () => {
    const { code, stdout } = await runCli(["--help"]);
    expect(code).toBe(0);
    for (const command of ["preprocess", "rollout", "train", "inspect", "serve", "doctor"]) {
      expect(stdout).toContain(command);
    }
  });

  it("--version prints the package version", async () => {
    const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, "package.json"), "utf8"));
    const { code, stdout } = await runCli(["--version"]);
    expect(code).toBe(0);
    expect(stdout.trim()).toBe(pkg.version);
  });

  it("an unknown command is a one-line error with a suggestion and exit code 2", async () => {
    const { code, stderr, stdout } = await runCli(["trian"]);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    const lines = stderr.trim().split("\n");
    expect(lines[0]).toMatch(/^error: unknown command 'trian'.*Did you mean train\?/);
    expect(lines[1]).toMatch(/^hint: /);
    expect(lines).toHaveLength(2);
  });

  it("an unknown flag is an error with exit code 2", async () => {
    const { code, stderr } = await runCli(["preprocess", "gsm8k", "--bogus"]);
    expect(code).toBe(2);
    expect(stderr).toMatch(/^error: unknown option '--bogus'/);
  });
});
