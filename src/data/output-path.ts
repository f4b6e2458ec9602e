/**
 * The check every command makes before it writes an output the user named (--out, --log-file, a run folder): that the
 * path can be a file or folder there and that its folder is writable. Without it the write fails halfway with Node's
 * text ("ENOTDIR: not a directory, mkdir ...", "EEXIST: file already exists, mkdir ...", an unhandled EISDIR event),
 * exit 1, sometimes after an engine or a worker has started. A wrong path is the user's to fix: InputError, exit 2.
 */
import { constants, promises as fs, type Stats } from "node:fs";
import path from "node:path";
import { InputError } from "../errors.js";
import { osErrorReason } from "../os-error.js";

/** The path itself, or its nearest ancestor that exists, with what it is. */
async function nearestExisting(target: string): Promise<{ at: string; stat: Stats }> {
  let at = path.resolve(target);
  for (;;) {
    try {
      return { at, stat: await fs.stat(at) };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Missing, or below a file: go up until something exists (the root always does).
      if ((code !== "ENOENT" && code !== "ENOTDIR") || path.dirname(at) === at) {
        throw new InputError(`${target}: ${osErrorReason(err) ?? code}`, { cause: err });
      }
      at = path.dirname(at);
    }
  }
}

/**
 * Throws an InputError naming `target` unless agentrl can create it (or replace it) as a `kind`: no file where a
 * folder must be, no folder where a file must be, and a writable folder to create it in.
 */
export async function checkOutputPath(target: string, kind: "file" | "folder"): Promise<void> {
  const { at, stat } = await nearestExisting(target);
  const resolved = path.resolve(target);
  let folder: string;
  if (at === resolved) {
    if (kind === "folder" && !stat.isDirectory()) throw new InputError(`${target}: is a file, expected a folder`);
    if (kind === "file" && stat.isDirectory()) throw new InputError(`${target}: is a folder, expected a file`);
    // A file is replaced by a temporary sibling renamed over it: its folder must be writable.
    folder = kind === "folder" ? at : path.dirname(at);
  } else {
    if (!stat.isDirectory()) throw new InputError(`${target}: cannot create it: ${at} is a file, not a folder`);
    folder = at;
  }
  try {
    await fs.access(folder, constants.W_OK | constants.X_OK);
  } catch (err) {
    const reason = osErrorReason(err) ?? (err as NodeJS.ErrnoException).code;
    throw new InputError(`${target}: cannot write in ${folder}: ${reason}`, { cause: err });
  }
}
