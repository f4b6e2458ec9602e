/**
 * Runs in each test file before the file itself (vitest.config.ts, setupFiles), also when files share a worker
 * process (isolate: false): the hooks every file needs whatever it imports.
 *
 * The temporary folders the file made (test/helpers/tmp.ts) are removed when it ends. This hook is registered before
 * the file's own hooks, so it runs after them (afterAll hooks run last-registered first): servers and children a file
 * stops in its afterAll are gone before their folders are removed.
 */
import { afterAll } from "vitest";
import { removeTempDirs } from "./helpers/tmp.js";

afterAll(removeTempDirs);
