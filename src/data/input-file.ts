/**
 * The checks every data reader makes before it opens a file. parquet-wasm reads through a Blob: given a folder, the
 * read fails inside wasm, which panics ("RuntimeError: unreachable", a stack trace, and a poisoned wasm instance), and
 * a missing file loses its ENOENT on the way ("Unable to open file as blob"). Node's stream readers throw raw
 * EISDIR/EACCES errors. Checking with stat first turns all of these into an InputError (exit 2) naming the path.
 */
import { promises as fs } from "node:fs";
import { InputError } from "../errors.js";

/** An OS error about `file`, in words a user can act on. */
export function describeFileError(file: string, err: unknown): InputError {
  const code = (err as NodeJS.ErrnoException).code;
  const reason =
    code === "ENOENT" ? "no such file"
    : code === "EACCES" || code === "EPERM" ? "permission denied"
    : code === "ENOTDIR" ? "a part of the path is not a folder"
    : code === "EISDIR" ? "is a folder"
    : `cannot read it (${code ?? (err as Error).message})`;
  return new InputError(`${file}: ${reason}`, { cause: err });
}

/**
 * Throws an InputError naming `file` unless it is an existing file, not a folder. `expected` completes "is a folder,
 * expected ..." (e.g. "a .parquet file").
 */
export async function checkInputFile(file: string, expected: string): Promise<void> {
  let stat;
  try {
    stat = await fs.stat(file);
  } catch (err) {
    throw describeFileError(file, err);
  }
  if (stat.isDirectory()) throw new InputError(`${file}: is a folder, expected ${expected}`);
}
