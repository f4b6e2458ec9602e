/**
 * Temporary folders a test file makes, removed when that file ends: a file only calls `tempDir` or `removeAfterAll`
 * and never writes its own clean-up. test/setup-file.ts registers the hook that removes them in every file.
 * test/global-setup.ts fails the suite when a file leaves anything in the suite's temp folder.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

const created = new Set<string>();

/** Removes `target` (a folder or a file, made by the test or by a process it started) when the file ends. */
export function removeAfterAll<T extends string>(target: T): T {
  created.add(target);
  return target;
}

/** A fresh folder `agentrl-<prefix>-XXXXXX` in the temp folder, removed when the test file ends. */
export function tempDir(prefix: string, parent: string = os.tmpdir()): string {
  return removeAfterAll(mkdtempSync(path.join(parent, `agentrl-${prefix}-`)));
}

/** Removes what the file registered so far; the afterAll hook calls it, a test may call it earlier. */
export function removeTempDirs(): void {
  for (const target of created) rmSync(target, { recursive: true, force: true });
  created.clear();
}
