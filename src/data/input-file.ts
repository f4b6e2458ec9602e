/**
 * The checks every data reader makes before it opens a file. parquet-wasm reads through a Blob: given a folder, the
 * read fails inside wasm, which panics ("RuntimeError: unreachable", a stack trace, and a poisoned wasm instance), and
 * a missing file loses its ENOENT on the way ("Unable to open file as blob"). Node's stream readers throw raw
 * EISDIR/EACCES errors. Checking with stat and access first turns all of these into an InputError (exit 2) naming the
 * path and the reason in words.
 */
import { constants, promises as fs } from "node:fs";
import { InputError } from "../errors.js";
import { osErrorReason } from "../os-error.js";

/** An OS error about the input `file`, in words a user can act on (src/os-error.ts). */
export function describeFileError(file: string, err: unknown, hint?: string): InputError {
  const reason = osErrorReason(err) ?? `cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
  return new InputError(`${file}: ${reason}`, { cause: err, ...(hint ? { hint } : {}) });
}

/**
 * Throws an InputError naming `file` unless it is an existing, readable file, not a folder. `expected` completes "is a
 * folder, expected ..." (e.g. "a .parquet file").
 */
export async function checkInputFile(file: string, expected: string): Promise<void> {
  let stat;
  try {
    stat = await fs.stat(file);
    await fs.access(file, constants.R_OK);
  } catch (err) {
    throw describeFileError(file, err);
  }
  if (stat.isDirectory()) throw new InputError(`${file}: is a folder, expected ${expected}`);
}

/** Throws an InputError naming `file` (given as `flag`) unless it is a file this process may execute. */
export async function checkExecutable(file: string, flag: string): Promise<void> {
  await checkInputFile(file, "an executable file");
  try {
    await fs.access(file, constants.X_OK);
  } catch {
    throw new InputError(`${flag} ${file}: not executable`);
  }
}
