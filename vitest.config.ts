import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // 2-core machines: end-to-end tests spawn the CLI and Python; keep parallelism modest.
    maxWorkers: 2,
  },
});
