/**
 * `agentrl template` end to end with real tokenizer files. The built CLI runs as a user runs it for a JSON render,
 * forced colour and a usage error; the other renders and input errors run the same command in this process
 * (helpers/in-process-cli.ts: the same text and exit codes without a Node start-up and a tokenizer load per call).
 */
import { describe, expect, it } from "vitest";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { runCli } from "./helpers/cli.js";
import { runCliInProcess } from "./helpers/in-process-cli.js";
import { FIXTURES_DIR, QWEN3_DIR, materializeFixtureModel } from "./fixtures/templates/materialize.js";
import { tempDir } from "./helpers/tmp.js";

const spec = JSON.parse(readFileSync(path.join(FIXTURES_DIR, "conversations.json"), "utf8")) as {
  tools: unknown[];
  conversations: Record<string, Array<{ role: string; content?: string }>>;
};
const expected = JSON.parse(readFileSync(path.join(FIXTURES_DIR, "expected.json"), "utf8")) as Record<
  string,
  Record<string, Record<"full" | "prompt", { text: string; ids: number[] }>>
>;

const temp = tempDir("template-cli");

function writeJson(name: string, value: unknown): string {
  const file = path.join(temp, name);
  writeFileSync(file, JSON.stringify(value));
  return file;
}

interface TemplateJson {
  text: string;
  ids: number[];
  mask: number[];
  segments: Array<{ kind: string; turn: number; start: number; end: number; text: string }>;
  drift: { status: string };
}

describe("agentrl template", () => {
  it("--json for a prompt: the Python render with the generation prompt, all mask 0", async () => {
    const messages = spec.conversations.tool_turn!.slice(0, 2);
    const result = await runCli([
      "template", "--model", QWEN3_DIR, "--messages", writeJson("prompt.json", messages),
      "--tools", writeJson("tools.json", spec.tools), "--json",
    ]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const out = JSON.parse(result.stdout) as TemplateJson;
    expect(out.text).toBe(expected.qwen3!.tool_turn!.prompt.text);
    expect(out.ids).toEqual(expected.qwen3!.tool_turn!.prompt.ids);
    expect(out.mask).toEqual(out.ids.map(() => 0));
    expect(out.segments).toEqual([{ kind: "prompt", turn: 0, start: 0, end: out.ids.length, text: out.text }]);
  });

  it("--json for a conversation with assistant turns: the training mask over the full render", async () => {
    const dir = materializeFixtureModel("qwen25-style", temp);
    const file = writeJson("conversation.json", { messages: spec.conversations.tool_turn, tools: spec.tools });
    const result = await runCliInProcess(["template", "--model", dir, "--messages", file, "--json"]);
    expect(result.code).toBe(0);
    const out = JSON.parse(result.stdout) as TemplateJson;
    const full = expected["qwen25-style"]!.tool_turn!.full;
    expect([...out.ids, ...[198]]).toEqual(full.ids); // the record ends at the last <|im_end|>, before the "\n"
    expect(out.segments.map((s) => s.kind)).toEqual(["prompt", "assistant", "tool", "assistant"]);
    for (const segment of out.segments) {
      const mask = out.mask.slice(segment.start, segment.end);
      expect(mask.every((m) => m === (segment.kind === "assistant" ? 1 : 0))).toBe(true);
    }
    expect(out.segments[1]!.text).toMatch(/^<tool_call>\n\{"name": "calculator"/);
    expect(out.segments[1]!.text.endsWith("<|im_end|>")).toBe(true);
    expect(out.drift.status).toBe("match");
  });

  it("the human view lists every token with its id and mask, uncoloured off a TTY", async () => {
    const dir = materializeFixtureModel("llama3-style", temp);
    const file = writeJson("chat.json", spec.conversations.chat);
    const result = await runCliInProcess(["template", "--model", dir, "--messages", file]);
    expect(result.code).toBe(0);
    expect(result.stdout).not.toContain("\u001b[");
    expect(result.stdout).toMatch(/end of turn <\|eot_id\|>/);
    expect(result.stdout).toMatch(/^\s+\d+\s+\d+\s+1\s+assistant:0\s+"<\|eot_id\|>"$/m);
    expect(result.stdout).toMatch(/^\s+0\s+\d+\s+0\s+prompt:0\s+"<\|begin_of_text\|>"$/m);
    expect(result.stdout).toMatch(/2 assistant turns/);
    expect(result.stdout).toMatch(/drift check: the token record equals a full re-render/);
  });

  it("colours trained tokens when colour is forced", async () => {
    const file = writeJson("short.json", [
      { role: "user", content: "hi" },
      { role: "assistant", content: "<think>\nok\n</think>\n\nhello" },
    ]);
    const result = await runCli(["template", "--model", QWEN3_DIR, "--messages", file], {
      env: { NO_COLOR: "", FORCE_COLOR: "1" },
    });
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("\u001b[32m");
  });

  it("a malformed messages file is exit 2 naming the file and the field", async () => {
    const file = writeJson("bad.json", [
      { role: "user", content: "hi" },
      { role: "assistant", tool_calls: [{ function: { arguments: {} } }] },
    ]);
    const result = await runCliInProcess(["template", "--model", QWEN3_DIR, "--messages", file]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("bad.json");
    expect(result.stderr).toMatch(/\[1\]\.tool_calls\[0\]\.function\.name/);
  });

  it("two assistant messages in a row are an input error naming the message", async () => {
    const file = writeJson("twice.json", [
      { role: "user", content: "hi" },
      { role: "assistant", content: "a" },
      { role: "assistant", content: "b" },
    ]);
    const result = await runCliInProcess(["template", "--model", QWEN3_DIR, "--messages", file]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/twice\.json: \[2\]\.role: two assistant messages in a row/);
  });

  it("a model folder without tokenizer files is exit 2", async () => {
    const file = writeJson("ok.json", [{ role: "user", content: "hi" }]);
    const result = await runCliInProcess(["template", "--model", temp, "--messages", file]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^error: .*tokenizer\.json: no such file/);
  });

  it("--kwargs passes template variables: Qwen3 without thinking gets an empty think block, mask 0", async () => {
    const file = writeJson("nothink.json", [{ role: "user", content: "hi" }]);
    const result = await runCliInProcess([
      "template", "--model", QWEN3_DIR, "--messages", file, "--kwargs", '{"enable_thinking": false}', "--json",
    ]);
    expect(result.code).toBe(0);
    const out = JSON.parse(result.stdout) as TemplateJson;
    expect(out.text.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n")).toBe(true);
    expect(out.mask.every((m) => m === 0)).toBe(true);
  });

  it("bad --kwargs and --drift values are usage errors", async () => {
    const file = writeJson("p.json", [{ role: "user", content: "hi" }]);
    const kwargs = await runCliInProcess(["template", "--model", QWEN3_DIR, "--messages", file, "--kwargs", "[1]"]);
    expect(kwargs.code).toBe(2);
    expect(kwargs.stderr).toMatch(/--kwargs must be a JSON object/);
    const drift = await runCliInProcess(["template", "--model", QWEN3_DIR, "--messages", file, "--drift", "loose"]);
    expect(drift.code).toBe(2);
    expect(drift.stderr).toMatch(/--drift must be one of strict, ignore_strippable, off/);
  });

  it("a missing --model is a usage error", async () => {
    const result = await runCli(["template", "--messages", "x.json"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/--model/);
  });
});
