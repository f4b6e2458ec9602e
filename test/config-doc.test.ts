import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "./helpers/cli.js";
import { configReference } from "../src/cli/config-doc.js";

describe("docs/config.md", () => {
  it("is what the schemas generate (run `npm run docs:config` after changing a config key)", () => {
    expect(readFileSync(path.join(REPO_ROOT, "docs/config.md"), "utf8")).toBe(configReference());
  });
  it("documents every key with a description", () => {
    const undocumented = configReference().split("\n").filter((line) => line.startsWith("| `") && line.endsWith("|  |"));
    expect(undocumented).toEqual([]);
  });
});
