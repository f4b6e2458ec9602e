import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { defineConfig } from "vitest/config";

// One private temp folder for the whole suite (test/global-setup.ts removes it at the end): every test worker and
// every process a test starts gets it as TMPDIR, so nothing is left in the machine's temp folder.
const suiteTmp = process.env.AGENTRL_SUITE_TMP ?? mkdtempSync(path.join(os.tmpdir(), "agentrl-suite-"));
process.env.AGENTRL_SUITE_TMP = suiteTmp;

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    env: { TMPDIR: suiteTmp, AGENTRL_SUITE_TMP: suiteTmp },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // 2-core machines: end-to-end tests spawn the CLI and Python; keep parallelism modest.
    maxWorkers: 2,
  },
});
