import { randomBytes } from "node:crypto";
import { promises as fs } from "node:fs";
import path from "node:path";
import { RefusedError } from "../errors.js";

/**
 * Writes a file so that readers see either the old content or the whole new content, never a half-written file:
 * write a temporary sibling, fsync it, then rename over the target (rename is atomic within one filesystem). A
 * failure while the content is produced (a stream that throws) leaves the target untouched and no temporary file.
 */
export async function writeFileAtomic(target: string, data: Uint8Array | string | AsyncIterable<Uint8Array>): Promise<void> {
  await fs.mkdir(path.dirname(target), { recursive: true });
  const temp = temporarySibling(target);
  let handle: fs.FileHandle | undefined;
  try {
    handle = await fs.open(temp, "wx");
    if (typeof data === "string" || data instanceof Uint8Array) await handle.writeFile(data);
    // A stream is written as it comes, so the content never has to fit in memory at once.
    else for await (const chunk of data) await handle.write(chunk);
    await handle.sync();
    await handle.close();
    handle = undefined;
    await fs.rename(temp, target);
  } catch (err) {
    await handle?.close().catch(() => undefined);
    await fs.rm(temp, { force: true });
    throw err;
  }
}

/** `dir/.name.tmp-<pid>-<random>`: hidden, unique per writer, and on the same filesystem as the target. */
export function temporarySibling(target: string): string {
  const dir = path.dirname(target);
  return path.join(dir, `.${path.basename(target)}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`);
}

export async function pathExists(p: string): Promise<boolean> {
  try {
    await fs.access(p);
    return true;
  } catch {
    return false;
  }
}

/** Refuses to overwrite outputs that exist (the caller skips this with --force): user data is never replaced silently. */
export async function refuseExisting(outputs: readonly string[]): Promise<void> {
  const existing: string[] = [];
  for (const output of outputs) if (await pathExists(output)) existing.push(output);
  if (existing.length) {
    throw new RefusedError(`output already exists: ${existing.join(", ")}`, {
      hint: "pass --force to overwrite it, or choose another --out folder",
    });
  }
}
