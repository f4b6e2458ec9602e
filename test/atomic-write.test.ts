/**
 * writeFileAtomic: a reader sees the old file or the whole new one. The test kills a writer while its temporary file
 * is being written (it waits for the temporary file to appear, so the kill always lands mid-write) and checks the
 * target still holds the old content. A plain in-place write would leave it truncated here.
 */
import { describe, expect, it } from "vitest";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import path from "node:path";
import { REPO_ROOT } from "./helpers/cli.js";
import { writeFileAtomic } from "../src/data/atomic.js";
import { tempDir } from "./helpers/tmp.js";

describe("writeFileAtomic", () => {
  it("replaces the content and leaves no temporary file", async () => {
    const dir = tempDir("atomic");
    const target = path.join(dir, "nested", "out.bin");
    await writeFileAtomic(target, "first");
    await writeFileAtomic(target, "second");
    expect(readFileSync(target, "utf8")).toBe("second");
    expect(readdirSync(path.dirname(target))).toEqual(["out.bin"]);
  });

  it("a writer killed mid-write leaves the old content in place", async () => {
    const dir = tempDir("atomic-kill");
    const target = path.join(dir, "data.parquet");
    writeFileSync(target, "old content");
    const script = `
      import { writeFileAtomic } from ${JSON.stringify(path.join(REPO_ROOT, "dist/data/atomic.js"))};
      const big = new Uint8Array(256 * 1024 * 1024).fill(7);
      await writeFileAtomic(${JSON.stringify(target)}, big);
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: "ignore" });
    const exited = new Promise((resolve) => child.on("close", resolve));
    let sawTemp = false;
    for (let i = 0; i < 4000 && !sawTemp; i++) {
      sawTemp = readdirSync(dir).some((name) => name.startsWith(".data.parquet.tmp-"));
      if (!sawTemp) await new Promise((resolve) => setTimeout(resolve, 5));
    }
    child.kill("SIGKILL");
    await exited;
    expect(sawTemp).toBe(true);
    expect(readFileSync(target, "utf8")).toBe("old content");
  });
});
