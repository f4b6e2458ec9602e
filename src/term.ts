import Table from "cli-table3";

/**
 * Terminal helpers shared by every command: colour only on a TTY and never under NO_COLOR,
 * and the width to lay tables out in.
 */
const ESC = "\u001b[";

export function colorEnabled(stream: NodeJS.WriteStream = process.stdout): boolean {
  if (process.env.NO_COLOR !== undefined && process.env.NO_COLOR !== "") return false;
  if (process.env.FORCE_COLOR !== undefined && process.env.FORCE_COLOR !== "0") return true;
  return Boolean(stream.isTTY);
}

export function terminalWidth(stream: NodeJS.WriteStream = process.stdout): number {
  return stream.columns && stream.columns > 20 ? stream.columns : 100;
}

function wrap(code: string, reset: string) {
  return (text: string, on: boolean = colorEnabled()): string => (on ? `${ESC}${code}m${text}${ESC}${reset}m` : text);
}

export const style = {
  bold: wrap("1", "22"),
  dim: wrap("2", "22"),
  red: wrap("31", "39"),
  green: wrap("32", "39"),
  yellow: wrap("33", "39"),
  blue: wrap("34", "39"),
  magenta: wrap("35", "39"),
  cyan: wrap("36", "39"),
  gray: wrap("90", "39"),
  bgGreen: wrap("42", "49"),
  bgGray: wrap("100", "49"),
};

/** Human-readable byte size: 1.2 MB. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** Human-readable duration: 850 ms, 4.2 s, 3m 12s. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  const seconds = Math.round((ms % 60_000) / 1000);
  return `${minutes}m ${seconds}s`;
}


/** A cli-table3 table that is coloured only when colour is enabled for stdout. */
export function makeTable(head: string[], options: { colWidths?: number[] } = {}): Table.Table {
  const on = colorEnabled();
  return new Table({
    head,
    style: { head: on ? ["cyan"] : [], border: on ? ["gray"] : [] },
    ...(options.colWidths ? { colWidths: options.colWidths } : {}),
  });
}

/** A failed worker's or engine's last log lines (errors that carry a `logTail`), dimmed on stderr before the error. */
export function writeLogTail(err: unknown): void {
  const tail = err instanceof Error && "logTail" in err ? (err as { logTail: unknown }).logTail : undefined;
  if (typeof tail === "string" && tail) process.stderr.write(`${style.dim(tail)}\n`);
}
