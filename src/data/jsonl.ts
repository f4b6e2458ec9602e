import { checkInputFile } from "./input-file.js";
import { readTextLines } from "./text-file.js";

/**
 * Streams the lines of a JSON-lines file with their 1-based line numbers, parsing each as JSON. A line that is not
 * JSON comes back as `{ line, error }` so the caller can name the file and line or skip it. Blank lines are skipped.
 * A missing, unreadable or folder path, or a line that is not UTF-8, is an InputError naming it, never a raw OS error
 * or a U+FFFD in the data.
 */
export async function* readJsonLines(
  file: string,
): AsyncGenerator<{ line: number; value?: unknown; error?: string }> {
  await checkInputFile(file, "a .jsonl file");
  for await (const { line, text } of readTextLines(file)) {
    if (text.trim() === "") continue;
    try {
      yield { line, value: JSON.parse(text) };
    } catch (err) {
      yield { line, error: `malformed JSON (${(err as Error).message})` };
    }
  }
}
