/**
 * Where custom tool modules load from (issue 15, "no phantom flags"): rollout and train allow the folder of the YAML
 * that names the module, and no flag adds others. doctor follows the same rule, and a refusal's hint says where to
 * put the module instead of suggesting a --tool-module-dir flag no command has.
 */
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { loadToolSchemas } from "../src/doctor/run-doctor.js";
import { InputError } from "../src/errors.js";
import { REPO_ROOT } from "./helpers/cli.js";
import { tempDir } from "./helpers/tmp.js";

const work = tempDir("tool-module-folder");

const WORD_COUNT = path.join(REPO_ROOT, "test", "fixtures", "tool-modules", "word-count-tool.mjs");

function toolYaml(dir: string, className: string): string {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, "tools.yaml");
  writeFileSync(
    file,
    `tools:
  - class_name: "${className}"
    config: {type: native}
    tool_schema:
      type: function
      function:
        name: word_count
        description: counts words
        parameters: {type: object, properties: {text: {type: string}}, required: []}
`,
  );
  return file;
}

describe("tool modules load from the YAML's own folder", () => {
  it("doctor loads a module that sits in a subfolder of the tool YAML's folder, as rollout and train do", async () => {
    const dir = path.join(work, "beside");
    mkdirSync(path.join(dir, "my-tools"), { recursive: true });
    copyFileSync(WORD_COUNT, path.join(dir, "my-tools", "word-count.mjs"));
    const schemas = await loadToolSchemas(toolYaml(dir, "my-tools/word-count.mjs#WordCountTool"));
    expect(schemas.map((schema) => (schema as { function: { name: string } }).function.name)).toEqual(["word_count"]);
  });

  it("a module outside that folder is refused with a hint to move it there, not a flag", async () => {
    const file = toolYaml(path.join(work, "elsewhere"), `${WORD_COUNT}#WordCountTool`);
    const error = await loadToolSchemas(file).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(InputError);
    expect((error as InputError).message).toMatch(/outside the allowed module directories/);
    expect((error as InputError).hint).toBe("put the module in the folder of the YAML file that names it (or a subfolder): only modules there are loaded");
  });
});
