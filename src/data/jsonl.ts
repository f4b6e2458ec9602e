import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
import { checkInputFile, describeFileError } from "./input-file.js";

/**
 * Streams the lines of a JSON-lines file with their 1-based line numbers, parsing each as JSON. A line that is not
 * JSON comes back as `{ line, error }` so the caller can name the file and line or skip it. Blank lines are skipped.
 * A missing, unreadable or folder path is an InputError naming it, never a raw OS error.
 */
export async function* readJsonLines(
  file: string,
): AsyncGenerator<{ line: number; value?: unknown; error?: string }> {
  await checkInputFile(file, "a .jsonl file");
  const lines = createInterface({ input: createReadStream(file, { encoding: "utf8" }), crlfDelay: Infinity });
  let line = 0;
  try {
    for await (const text of lines) {
      line += 1;
      if (text.trim() === "") continue;
      try {
        yield { line, value: JSON.parse(text) };
      } catch (err) {
        yield { line, error: `malformed JSON (${(err as Error).message})` };
      }
    }
  } catch (err) {
    // Only the read stream throws here (EACCES, EIO, ...): the consumer's errors never enter a generator.
    if ((err as NodeJS.ErrnoException).code) throw describeFileError(file, err);
    throw err;
  }
}
