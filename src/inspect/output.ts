/**
 * How inspect writes: colour only when src/cli/term.ts allows it (a TTY, never under NO_COLOR), layout to the
 * terminal's width (or $COLUMNS when piped), and long text through a pager, only when stdout is a TTY.
 */
import { spawn } from "node:child_process";
import Table from "cli-table3";
import { colorEnabled, style } from "../term.js";

export interface Look {
  color: boolean;
  width: number;
}

export function currentLook(stream: NodeJS.WriteStream = process.stdout): Look {
  const fromEnv = Number(process.env.COLUMNS);
  const width = stream.isTTY && stream.columns ? stream.columns : Number.isInteger(fromEnv) && fromEnv > 20 ? fromEnv : 100;
  return { color: colorEnabled(stream), width: Math.max(40, width) };
}

export type Paint = (text: string) => string;

/** Style functions bound to one decision about colour. */
export function painter(look: Look) {
  const bind = (fn: (text: string, on?: boolean) => string): Paint => (text) => fn(text, look.color);
  return {
    bold: bind(style.bold),
    dim: bind(style.dim),
    red: bind(style.red),
    green: bind(style.green),
    yellow: bind(style.yellow),
    blue: bind(style.blue),
    magenta: bind(style.magenta),
    cyan: bind(style.cyan),
    gray: bind(style.gray),
    bgGreen: bind(style.bgGreen),
    bgGray: bind(style.bgGray),
  };
}
export type Painter = ReturnType<typeof painter>;

// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g;
export const visibleLength = (text: string) => [...text.replace(ANSI, "")].length;

/**
 * A cli-table3 table that fits `look.width`: when the natural widths overflow, the widest columns shrink (words
 * wrap) until the table fits.
 */
export function fitTable(look: Look, head: string[], rows: Array<Array<string | number>>): string {
  const cells = rows.map((row) => row.map((cell) => String(cell)));
  const natural = head.map((h, c) =>
    Math.max(visibleLength(h), ...cells.map((row) => Math.max(...String(row[c] ?? "").split("\n").map(visibleLength)))) + 2,
  );
  const budget = look.width - (head.length + 1);
  // A column never gets narrower than the longest word of its header (or 4), so headers wrap between words.
  const floor = head.map((h, c) => Math.min(natural[c]!, Math.max(4, ...h.split(/\s+/).map(visibleLength)) + 2));
  const widths = [...natural];
  while (widths.reduce((a, b) => a + b, 0) > budget) {
    let widest = -1;
    widths.forEach((w, c) => {
      if (w > floor[c]! && (widest < 0 || w > widths[widest]!)) widest = c;
    });
    if (widest < 0) break; // as narrow as it gets: let the terminal wrap
    widths[widest]! -= 1;
  }
  const table = new Table({
    // A header that no longer fits breaks between its words (each fits: see floor); values wrap anywhere, so none
    // is cut short.
    head: head.map((h, c) => (visibleLength(h) > widths[c]! - 2 ? h.replace(/\s+/g, "\n") : h)),
    colWidths: widths,
    wordWrap: true,
    wrapOnWordBoundary: false,
    style: { head: look.color ? ["cyan"] : [], border: look.color ? ["gray"] : [] },
  });
  for (const row of cells) table.push(row);
  return table.toString();
}

/**
 * Wraps text to `width` columns at spaces (breaking words longer than half a line), keeping existing newlines.
 * Colour codes take no room, so a coloured text wraps exactly like its plain version.
 */
export function wrapText(text: string, width: number, indent = ""): string {
  const room = Math.max(10, width - visibleLength(indent));
  return text
    .split("\n")
    .flatMap((line) => wrapLine(line, room))
    .map((line) => indent + line)
    .join("\n");
}

function wrapLine(line: string, room: number): string[] {
  if (visibleLength(line) <= room) return [line];
  // eslint-disable-next-line no-control-regex
  const parts = line.match(/\u001b\[[0-9;]*m|[\s\S]/gu) ?? [];
  const isCode = (part: string) => part.startsWith("\u001b");
  const lines: string[] = [];
  let current: string[] = [];
  let width = 0;
  for (const part of parts) {
    if (isCode(part)) {
      current.push(part);
      continue;
    }
    if (width === room) {
      const space = current.lastIndexOf(" ");
      const before = space < 0 ? 0 : current.slice(0, space).filter((p) => !isCode(p)).length;
      if (space >= 0 && before >= room / 2) {
        lines.push(current.slice(0, space).join("").trimEnd());
        current = current.slice(space + 1);
      } else {
        lines.push(current.join(""));
        current = [];
      }
      width = current.filter((p) => !isCode(p)).length;
    }
    current.push(part);
    width += 1;
  }
  lines.push(current.join(""));
  return lines;
}

/**
 * Writes a view. On a TTY, when the text is taller than the screen and --no-pager was not given, it goes through
 * $PAGER (default `less -R -F -X`, which quits at once on short text and keeps colours). Never pages a pipe.
 */
export async function emit(text: string, options: { pager: boolean }): Promise<void> {
  const body = text.endsWith("\n") ? text : `${text}\n`;
  const rows = process.stdout.rows ?? 24;
  const tall = body.split("\n").length > rows;
  if (!(options.pager && process.stdout.isTTY && tall)) {
    process.stdout.write(body);
    return;
  }
  const pager = process.env.PAGER?.trim() || "less -R -F -X";
  const paged = await new Promise<boolean>((resolve) => {
    const child = spawn(pager, { shell: true, stdio: ["pipe", "inherit", "inherit"], env: { LESS: "FRX", ...process.env } });
    child.on("error", () => resolve(false));
    // 127: the shell found no such pager; print instead of losing the text.
    child.on("close", (code) => resolve(code !== 127));
    child.stdin.on("error", () => undefined); // the reader quit early: not an error
    child.stdin.end(body);
  });
  if (!paged) process.stdout.write(body);
}

/** Compact number formatting for tables: integers as is, others with `digits` decimals. */
export function fmt(value: number | null | undefined, digits = 3): string {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(digits);
}

export const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
