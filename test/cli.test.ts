import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT, runCli } from "./helpers/cli.js";

describe("agentrl CLI skeleton", () => {
  const COMMANDS = ["preprocess", "rollout", "sft", "train", "export", "inspect", "serve", "doctor", "parse", "template"];
  /** Leaf commands: the ones a user runs (preprocess only groups its datasets). */
  const LEAVES = [["preprocess", "gsm8k"], ["preprocess", "vault"], ...COMMANDS.filter((c) => c !== "preprocess").map((c) => [c])];

  it("--help lists every command, each with a description", async () => {
    const { code, stdout } = await runCli(["--help"]);
    expect(code).toBe(0);
    const listed = [...stdout.matchAll(/^ {2}([a-z]+)\b[^\n]*?\s{2,}(\S.{15,})$/gm)].map((m) => m[1]);
    expect(listed).toEqual([...COMMANDS, "help"]);
    expect(stdout).toContain("Run 'agentrl <command> --help'");
  });

  it.each(LEAVES.map((words) => [words.join(" "), words]))("%s --help teaches: usage, every option described, examples", async (_, words) => {
    const { code, stdout } = await runCli([...(words as string[]), "--help"]);
    expect(code).toBe(0);
    expect(stdout).toMatch(new RegExp(`^Usage: agentrl ${(words as string[]).join(" ")} `));
    const options = stdout.slice(stdout.indexOf("Options:")).split(/\n(?=\S)/)[0]!;
    expect(options).toMatch(/^Options:\n {2}-/);
    // Every option line carries words after the flag, not a bare flag.
    const bare = options.split("\n").filter((line) => /^ {2}-/.test(line) && !/^ {2}-\S*(?:, --\S+)?(?: <[^>]+>| \[[^\]]+\])?\s{2,}\S/.test(line));
    expect(bare).toEqual([]);
    expect(stdout).toMatch(/^Examples?:$/m);
    // An example runs the command itself (possibly fed by a pipe).
    expect(stdout).toMatch(new RegExp(`^ *\\$ (?:.*\\| )?agentrl ${(words as string[]).join(" ")}\\b`, "m"));
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
