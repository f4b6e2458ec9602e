/**
 * Finds the `--flags` that docs and hint strings tell users to type, for test/docs-flags.test.ts to check against
 * each command's `--help`. Deliberately simple text scanning:
 * - after `agentrl <command>` (or `bin/agentrl.js <command>`) in markdown code, or on a source line: that
 *   command's flag, up to a shell comment, a pipe, `;`, `&&` or a bare `--` (after which flags belong to the engine);
 * - in an inline code span that starts with `--flag` or `<command> ... --flag`, and on source lines that give a
 *   `hint`: some command's flag (the text does not say which).
 * Quoted text is skipped in markdown code: `--set 'x=[--node_rank=0]'` passes a value, not a flag.
 */

export interface FlagMention {
  flag: string;
  /** The command the text runs ("rollout", "preprocess gsm8k"); undefined when it names none. */
  command: string | undefined;
  /** file:line, for the failure message. */
  where: string;
}

/** Command names and, for commands with subcommands, their subcommand names. */
export type CommandTree = Map<string, string[]>;

const FLAG = /(?<![\w-])--[a-z][a-z0-9_-]*/g;
const INVOCATION = /(?:\bagentrl|bin\/agentrl\.js)\s+([a-z][a-z-]*)/g;

/** The text up to where the command's own flags end: a comment, a pipe, the next command, a string's end, a bare --. */
function ownPart(segment: string): string {
  const end = segment.search(/\s#|\||;|&&|`|"|(?:^|[\s[])--(?=[\s\]]|$)/);
  return end === -1 ? segment : segment.slice(0, end);
}

/** Mentions in one piece of text (a code line, a span, a source line) that runs `agentrl <command>`. */
function invocationMentions(text: string, tree: CommandTree, where: string): FlagMention[] {
  const mentions: FlagMention[] = [];
  const matches = [...text.matchAll(INVOCATION)];
  matches.forEach((match, i) => {
    const subcommands = tree.get(match[1]!);
    if (subcommands === undefined) return;
    let command = match[1]!;
    let start = match.index! + match[0].length;
    const end = matches[i + 1]?.index ?? text.length;
    const sub = /^\s+([a-z][a-z0-9-]*)/.exec(text.slice(start, end));
    if (sub && subcommands.includes(sub[1]!)) {
      command = `${command} ${sub[1]}`;
      start += sub[0].length;
    }
    for (const flag of ownPart(text.slice(start, end)).match(FLAG) ?? []) mentions.push({ flag, command, where });
  });
  return mentions;
}

const withoutQuoted = (code: string) => code.replace(/'[^']*'|"[^"]*"/g, "''");

export function flagMentionsInMarkdown(text: string, tree: CommandTree, file: string): FlagMention[] {
  const mentions: FlagMention[] = [];
  const lines = text.split("\n");
  let inFence = false;
  for (let i = 0; i < lines.length; i++) {
    const where = `${file}:${i + 1}`;
    let line = lines[i]!;
    if (/^\s*```/.test(line)) {
      inFence = !inFence;
      continue;
    }
    if (inFence) {
      // A shell command continued with a backslash is one command.
      while (line.endsWith("\\") && i + 1 < lines.length) line = `${line.slice(0, -1)} ${lines[++i]!}`;
      mentions.push(...invocationMentions(withoutQuoted(line), tree, where));
      continue;
    }
    for (const span of line.match(/`[^`]+`/g) ?? []) {
      const code = withoutQuoted(span.slice(1, -1));
      const leadingCommand = /^([a-z][a-z-]*)\s/.exec(code)?.[1];
      if (/^(?:agentrl|bin\/agentrl\.js)\s/.test(code.replace(/^node\s+/, ""))) mentions.push(...invocationMentions(code, tree, where));
      else if (leadingCommand !== undefined && tree.has(leadingCommand)) mentions.push(...invocationMentions(`agentrl ${code}`, tree, where));
      else if (code.startsWith("--")) for (const flag of ownPart(code).match(FLAG) ?? []) mentions.push({ flag, command: undefined, where });
    }
  }
  return mentions;
}

/** Source lines that run `agentrl <command> ...` (resume hints, help examples), and every flag on a `hint` line. */
export function flagMentionsInSource(text: string, tree: CommandTree, file: string): FlagMention[] {
  const mentions: FlagMention[] = [];
  text.split("\n").forEach((line, i) => {
    const where = `${file}:${i + 1}`;
    const invoked = invocationMentions(line, tree, where);
    mentions.push(...invoked);
    if (!/\bhint\b/.test(line)) return;
    const claimed = new Set(invoked.map((m) => m.flag));
    for (const flag of line.match(FLAG) ?? []) if (!claimed.has(flag)) mentions.push({ flag, command: undefined, where });
  });
  return mentions;
}

/** The long flags in the Options section of commander's help output. */
export function optionFlagsOfHelp(help: string): Set<string> {
  const flags = new Set<string>();
  for (const match of help.matchAll(/^ {2}(?:-[A-Za-z], )?(--[a-z][a-z0-9-]*)/gm)) flags.add(match[1]!);
  return flags;
}

/** The command names listed in the Commands section of commander's help output (without `help`). */
export function commandsOfHelp(help: string): string[] {
  const section = help.split(/^Commands:$/m)[1];
  if (section === undefined) return [];
  const names: string[] = [];
  // The section starts with the rest of the "Commands:" line and ends at the first blank line.
  for (const line of section.split("\n").slice(1)) {
    if (line.trim() === "") break;
    const match = /^ {2}([a-z][a-z0-9-]*)/.exec(line);
    if (match && match[1] !== "help") names.push(match[1]!);
  }
  return names;
}
