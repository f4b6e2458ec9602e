import { InputError } from "../errors.js";
import { readTextFile } from "./text-file.js";

/**
 * Reads and parses a JSON file as strict UTF-8. Errors name the file; an absent optional file gives undefined.
 */
export async function readJsonFile(file: string, options: { optional?: boolean; hint?: string } = {}): Promise<unknown> {
  const text = options.optional
    ? await readTextFile(file, { optional: true, ...(options.hint ? { hint: options.hint } : {}) })
    : await readTextFile(file, options.hint ? { hint: options.hint } : {});
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new InputError(`${file}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
}
