import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";

/**
 * Streams the lines of a JSON-lines file with their 1-based line numbers, parsing each as JSON. A line that is not
 * JSON comes back as `{ line, error }` so the caller can name the file and line or skip it. Blank lines are skipped.
 */
export async function* readJsonLines(
  file: string,
): AsyncGenerator<{ line: number; value?: unknown; error?: string }> {
  const lines = createInterface({ input: createReadStream(file, { encoding: "utf8" }), crlfDelay: Infinity });
  let line = 0;
  for await (const text of lines) {
    line += 1;
    if (text.trim() === "") continue;
    try {
      yield { line, value: JSON.parse(text) };
    } catch (err) {
      yield { line, error: `malformed JSON (${(err as Error).message})` };
    }
  }
}
