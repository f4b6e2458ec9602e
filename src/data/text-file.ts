/**
 * Text from the user (configs, datasets, message files, model files, stdin) is read as strict UTF-8. A byte sequence
 * that is not UTF-8 is an InputError naming the file, line and column, never silently replaced by U+FFFD (which would
 * train on, match against or run text nobody wrote). OS errors become InputErrors naming the path (input-file.ts).
 */
import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { InputError } from "../errors.js";
import { describeFileError } from "./input-file.js";

const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;
const UTF8_HINT = "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 FILE)";

/** Whether bytes[0, end) decodes; `stream` lets the prefix stop inside a character. */
function decodes(bytes: Uint8Array, end: number, stream: boolean): boolean {
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(0, end), { stream });
    return true;
  } catch {
    return false;
  }
}

/** The offset of the first byte of the first sequence in `bytes` that is not UTF-8 (bytes must fail to decode). */
function firstBadOffset(bytes: Uint8Array): number {
  // The shortest prefix that fails even when it may end mid-character: the bad sequence ends there. Failing is
  // monotonic in the prefix length, so a binary search finds it; none fails when the file ends mid-character.
  let lo = 0;
  let hi = bytes.length + 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (decodes(bytes, mid, true)) lo = mid;
    else hi = mid;
  }
  // The sequence starts at the last point where everything before it decodes completely (at most 3 bytes back).
  let start = hi - 1;
  while (start > 0 && start > hi - 4 && !decodes(bytes, start, false)) start -= 1;
  return Math.min(start, bytes.length - 1);
}

/**
 * Decodes `bytes` as strict UTF-8 (a leading byte-order mark is dropped). Throws an InputError naming
 * `source:line:column` of the first byte that is not UTF-8; `firstLine` is the line number `bytes` starts on.
 */
export function decodeUtf8(bytes: Uint8Array, source: string, firstLine = 1): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    const offset = firstBadOffset(bytes);
    // (lastIndexOf counts a negative start from the end: offset 0 is the first line's start.)
    const lineStart = offset === 0 ? 0 : bytes.lastIndexOf(NEWLINE, offset - 1) + 1;
    let line = firstLine;
    for (let i = bytes.indexOf(NEWLINE); i !== -1 && i < offset; i = bytes.indexOf(NEWLINE, i + 1)) line += 1;
    const column = [...new TextDecoder("utf-8").decode(bytes.subarray(lineStart, offset))].length + 1;
    const byte = bytes[offset]!.toString(16).padStart(2, "0");
    throw new InputError(`${source}:${line}:${column}: not valid UTF-8 (byte 0x${byte})`, { hint: UTF8_HINT });
  }
}

/** Reads a whole text file as strict UTF-8; a missing, unreadable or folder path is an InputError naming it. */
export async function readTextFile(file: string, options?: { hint?: string }): Promise<string>;
/** With `optional`, a file that does not exist gives undefined. */
export async function readTextFile(file: string, options: { optional: true; hint?: string }): Promise<string | undefined>;
export async function readTextFile(file: string, options: { optional?: boolean; hint?: string } = {}): Promise<string | undefined> {
  let bytes: Uint8Array;
  try {
    bytes = await readFile(file);
  } catch (err) {
    if (options.optional && (err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw describeFileError(file, err, options.hint);
  }
  return decodeUtf8(bytes, file);
}

/**
 * Streams the lines of a text file (1-based line numbers, without "\n" or "\r\n"), each decoded as strict UTF-8, so
 * a file of any size is read in bounded memory. The caller checks the path first (checkInputFile); an OS error while
 * reading is an InputError naming the file.
 */
export async function* readTextLines(file: string): AsyncGenerator<{ line: number; text: string }> {
  let line = 0;
  let pending: Buffer[] = [];
  const decodeLine = (bytes: Buffer): string => {
    line += 1;
    const end = bytes.length > 0 && bytes[bytes.length - 1] === CARRIAGE_RETURN ? bytes.length - 1 : bytes.length;
    return decodeUtf8(bytes.subarray(0, end), file, line);
  };
  try {
    for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) {
      let start = 0;
      for (let newline = chunk.indexOf(NEWLINE); newline !== -1; newline = chunk.indexOf(NEWLINE, start)) {
        const piece = chunk.subarray(start, newline);
        const bytes = pending.length ? Buffer.concat([...pending, piece]) : piece;
        pending = [];
        start = newline + 1;
        const text = decodeLine(bytes);
        yield { line, text };
      }
      if (start < chunk.length) pending.push(chunk.subarray(start));
    }
  } catch (err) {
    // The read stream's errors (EACCES, EIO, ...); a consumer's errors never enter a generator.
    if ((err as NodeJS.ErrnoException).code) throw describeFileError(file, err);
    throw err;
  }
  if (pending.length) {
    const text = decodeLine(Buffer.concat(pending));
    yield { line, text };
  }
}
