/** A chat template that fails to render is bad input: a clear message naming the template file, exit code 2. */
import { describe, expect, it } from "vitest";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { runCli } from "./helpers/cli.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { tempDir } from "./helpers/tmp.js";

describe("agentrl template with a broken chat template", () => {
  it("names the template file and exits 2", async () => {
    const dir = tempDir("badtpl");
    copyFileSync(path.join(QWEN3_DIR, "tokenizer.json"), path.join(dir, "tokenizer.json"));
    const config = JSON.parse(readFileSync(path.join(QWEN3_DIR, "tokenizer_config.json"), "utf8"));
    // Parses, but fails when rendered: the loop calls a method that strings do not have.
    config.chat_template = "{% for message in messages %}{{ message.content.no_such_method() }}{% endfor %}";
    writeFileSync(path.join(dir, "tokenizer_config.json"), JSON.stringify(config));
    const messages = path.join(dir, "messages.json");
    writeFileSync(messages, JSON.stringify([{ role: "user", content: "hi" }]));
    const result = await runCli(["template", "--model", dir, "--messages", messages]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("tokenizer_config.json: the chat template failed to render");
  });
});
