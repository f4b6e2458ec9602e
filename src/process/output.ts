/**
 * A supervised child's output: stdout and stderr split into whole lines for the caller, everything appended to an
 * optional log file as it comes, and the last meaningful lines kept for error messages.
 */
import { createWriteStream, mkdirSync, type WriteStream } from "node:fs";
import path from "node:path";
import type { Readable } from "node:stream";
import { StringDecoder } from "node:string_decoder";

/** Splits a stream's chunks into lines: a line (or a UTF-8 character) cut between two chunks stays whole. */
class LineBuffer {
  private readonly decoder = new StringDecoder("utf8");
  private rest = "";

  push(chunk: Buffer): string[] {
    const lines = (this.rest + this.decoder.write(chunk)).split(/\r?\n/);
    this.rest = lines.pop() ?? "";
    return lines;
  }

  /** The last line, when the stream ended without a newline. */
  end(): string[] {
    const rest = this.rest + this.decoder.end();
    this.rest = "";
    return rest ? [rest] : [];
  }
}

export interface ChildOutputOptions {
  /** How many lines the tail keeps. */
  tailLines: number;
  /** Appends the child's stdout and stderr here, as written. */
  logFile?: string;
  /** Called with every line, empty ones included. */
  onLine?: (line: string) => void;
}

export class ChildOutput {
  private readonly tail: string[] = [];
  private readonly buffers: LineBuffer[] = [];
  private log: WriteStream | undefined;
  private ended = false;

  constructor(private readonly options: ChildOutputOptions) {
    if (options.logFile) {
      mkdirSync(path.dirname(path.resolve(options.logFile)), { recursive: true });
      this.log = createWriteStream(options.logFile, { flags: "a" });
    }
  }

  /** Reads one of the child's pipes until it closes. */
  capture(stream: Readable): void {
    const lines = new LineBuffer();
    this.buffers.push(lines);
    stream.on("data", (chunk: Buffer) => {
      if (this.ended) return;
      this.log?.write(chunk);
      this.take(lines.push(chunk));
    });
  }

  /** The child is gone: takes the lines cut off without a newline and closes the log file. */
  end(): void {
    if (this.ended) return;
    for (const lines of this.buffers) this.take(lines.end());
    this.ended = true;
    this.log?.end();
  }

  /** A line of agentrl's own about the child (how it ended), written to the log and kept in the tail like the child's. */
  note(line: string): void {
    if (this.ended) return;
    this.log?.write(`${line}\n`);
    this.take([line]);
  }

  /** The last lines, without blank ones and colour codes. */
  lastLines(): string[] {
    return [...this.tail];
  }

  private take(lines: string[]): void {
    for (const line of lines) {
      this.keep(line);
      this.options.onLine?.(line);
    }
  }

  /**
   * Python 3.11 tracebacks mark columns with lines of `^` and `~`, and torchrun prints its own long traceback after a
   * rank fails: without this filter they push the child's actual error out of the tail a user sees.
   */
  private keep(line: string): void {
    const plain = line.replace(/\u001b\[[0-9;]*m/g, ""); // colour codes (FORCE_COLOR) would hide a marker-only line
    if (/^[\s^~]*$/.test(plain)) return;
    this.tail.push(plain);
    if (this.tail.length > this.options.tailLines) this.tail.shift();
  }
}
