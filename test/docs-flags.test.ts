/**
 * No phantom flags (issue 15): every `--flag` that README.md, docs/*.md or a hint in src/ tells users to type exists
 * in the `--help` of the built CLI, for the command the text runs (`agentrl rollout ... --resume`) or, where the text
 * names no command, for some command. Flags of other programs the docs explain (SGLang, torchrun, the Python worker)
 * are listed below by name.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { commandsOfHelp, flagMentionsInMarkdown, flagMentionsInSource, optionFlagsOfHelp, type CommandTree, type FlagMention } from "./helpers/doc-flags.js";

/** Flags of other programs, which the docs mention where they explain what agentrl runs. */
const OTHER_PROGRAMS_FLAGS: Record<string, string[]> = {
  "SGLang's launch_server (agentrl serve passes flags after -- through)": [
    "--tp-size",
    "--dp-size",
    "--enable-memory-saver",
    "--mem-fraction-static",
    "--model-path",
    "--skip-tokenizer-init",
    "--tool-call-parser",
    "--random-seed",
    "--context-length",
    "--enable-priority-scheduling",
    "--abort-on-priority-when-disabled",
    "--enable-lora",
    "--max-lora-rank",
    "--lora-target-modules",
    "--reasoning-parser",
  ],
  "the embedded engine's own command line (python -m agentrl_worker.embedded_server)": [
    "--dtype",
    "--max-batch",
    "--prefix-cache-mb",
    "--disable-radix-cache",
  ],
  "the Python tool host's command line (python -m agentrl_worker.tool_host, docs/tool-host-protocol.md)": ["--class", "--config", "--schema", "--path"],
  "Node, which bin/agentrl.js's launcher starts with a larger young generation (docs/benchmarks.md)": ["--max-semi-space-size"],
  "torchrun and the Python worker it starts": ["--nnodes", "--nproc_per_node", "--node_rank", "--parent-pid", "--idle-timeout-h"],
  "bubblewrap, which runs the python code tool (docs/security.md)": [
    "--clearenv",
    "--unshare-net",
    "--die-with-parent",
    "--new-session",
    "--disable-userns",
    "--bind",
  ],
};
const OTHER_FLAGS = new Set(Object.values(OTHER_PROGRAMS_FLAGS).flat());

const tree: CommandTree = new Map();
/** "rollout" or "preprocess gsm8k" → the long flags its --help lists. */
const flagsOf = new Map<string, Set<string>>();
const anyCommandFlags = new Set<string>();

async function help(args: string[]): Promise<string> {
  const result = await runCli([...args, "--help"]);
  if (result.code !== 0) throw new Error(`agentrl ${args.join(" ")} --help exited ${result.code}: ${result.stderr}`);
  return result.stdout;
}

beforeAll(async () => {
  for (const command of commandsOfHelp(await help([]))) {
    const text = await help([command]);
    const subcommands = commandsOfHelp(text);
    tree.set(command, subcommands);
    flagsOf.set(command, optionFlagsOfHelp(text));
    for (const sub of subcommands) flagsOf.set(`${command} ${sub}`, optionFlagsOfHelp(await help([command, sub])));
  }
  for (const flags of flagsOf.values()) for (const flag of flags) anyCommandFlags.add(flag);
}, 60_000);

/** The mentions whose flag the command they name (or, naming none, every command) lacks. */
function phantoms(mentions: FlagMention[]): string[] {
  return mentions
    .filter(({ flag, command }) => {
      if (command !== undefined) return !flagsOf.get(command)!.has(flag);
      return !anyCommandFlags.has(flag) && !OTHER_FLAGS.has(flag);
    })
    .map(({ flag, command, where }) => `${where}: ${command === undefined ? "" : `agentrl ${command} `}${flag}`);
}

const markdownFiles = ["README.md", ...readdirSync(path.join(REPO_ROOT, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
const sourceFiles = readdirSync(path.join(REPO_ROOT, "src"), { recursive: true })
  .map(String)
  .filter((f) => f.endsWith(".ts"))
  .map((f) => `src/${f}`);
const read = (file: string) => readFileSync(path.join(REPO_ROOT, file), "utf8");

describe("flags in docs and hints exist in --help", () => {
  it("found the commands and their flags", () => {
    expect([...tree.keys()]).toEqual(expect.arrayContaining(["rollout", "train", "serve", "doctor", "preprocess"]));
    expect(tree.get("preprocess")).toContain("gsm8k");
    expect(flagsOf.get("rollout")).toContain("--resume");
    expect(flagsOf.get("preprocess gsm8k")).toContain("--input");
  });

  it("the scanner reports a made-up flag, in code, in a span and in a hint", () => {
    const doc = [
      "```bash",
      "agentrl rollout --config r.yaml \\",
      "  --no-such-flag --set 'x=[--quoted_value]' -- --engine-arg",
      "```",
      "Run `agentrl train --resume --made-up` or pass `--invented DIR`.",
    ].join("\n");
    expect(phantoms(flagMentionsInMarkdown(doc, tree, "doc.md"))).toEqual([
      "doc.md:2: agentrl rollout --no-such-flag",
      "doc.md:5: agentrl train --made-up",
      "doc.md:5: --invented",
    ]);
    const source = 'throw new InputError("x", { hint: "pass --tool-module-dir DIR, or run agentrl serve --port 0 --bogus" });';
    expect(phantoms(flagMentionsInSource(source, tree, "x.ts"))).toEqual(["x.ts:1: agentrl serve --bogus", "x.ts:1: --tool-module-dir"]);
  });

  it("every flag the docs (README.md, docs/*.md) mention exists", () => {
    const mentions = markdownFiles.flatMap((file) => flagMentionsInMarkdown(read(file), tree, file));
    // The scan must see the docs' commands at all, or it would pass by finding nothing.
    expect(mentions.filter((m) => m.command === "serve").length).toBeGreaterThan(5);
    expect(phantoms(mentions)).toEqual([]);
  });

  it("every flag a hint or a command line in src/ mentions exists", () => {
    const mentions = sourceFiles.flatMap((file) => flagMentionsInSource(read(file), tree, file));
    expect(mentions.filter((m) => m.command === undefined).length).toBeGreaterThan(10);
    expect(phantoms(mentions)).toEqual([]);
  });
});
