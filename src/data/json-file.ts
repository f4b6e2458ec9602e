import { readFile } from "node:fs/promises";
import { InputError } from "../errors.js";

/**
 * Reads and parses a JSON file. Errors name the file; an absent optional file gives undefined.
 */
export async function readJsonFile(file: string, options: { optional?: boolean; hint?: string } = {}): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if (options.optional && (err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new InputError(`cannot read ${file}: ${(err as Error).message}`, {
      ...(options.hint ? { hint: options.hint } : {}),
      cause: err,
    });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new InputError(`${file}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
}
