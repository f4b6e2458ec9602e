// Tools: verl's Gsm8kTool texts and rewards, the calculator, Python repr, truncation, YAML loading and the
// runner's fault handling (throw, hang, huge or non-UTF-8 output, concurrency).
import { rmSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InputError } from "../src/errors.js";
import {
  evaluateExpression,
  Gsm8kTool,
  loadToolRegistry,
  pyFloatRepr,
  pyJsonDumps,
  pyStr,
  pyStrRepr,
  runToolCall,
  truncateToolResponse,
  type ToolRegistry,
} from "../src/tools/index.js";
import { REPO_ROOT } from "./helpers/cli.js";
import { tempDir } from "./helpers/tmp.js";

const GSM8K_YAML = path.join(REPO_ROOT, "tool-configs", "gsm8k_tool_config.yaml");
const MODULES = path.join(REPO_ROOT, "test", "fixtures", "tool-modules");
const OUTSIDE = path.join(REPO_ROOT, "test", "fixtures", "outside-modules");
const tmp = tempDir("tools-test");
let counter = 0;

function yamlFile(text: string): string {
  const file = path.join(tmp, `tools-${counter++}.yaml`);
  writeFileSync(file, text);
  return file;
}

function nativeEntry(className: string, name: string, config = "type: native"): string {
  return `tools:
  - class_name: "${className}"
    config: {${config}}
    tool_schema:
      type: function
      function:
        name: ${name}
        description: test tool
        parameters: {type: object, properties: {text: {type: string}}, required: []}
`;
}

describe("Python repr", () => {
  it("formats floats like repr(float)", () => {
    expect([1.0, 0.0, -0.05, 0.1, 1e16, 1e-5, 0.0001, 123.456, 1.5e300, 2 ** 53].map(pyFloatRepr)).toEqual([
      "1.0",
      "0.0",
      "-0.05",
      "0.1",
      "1e+16",
      "1e-05",
      "0.0001",
      "123.456",
      "1.5e+300",
      "9007199254740992.0",
    ]);
  });

  it("quotes and escapes strings like repr(str)", () => {
    expect(pyStrRepr("18")).toBe("'18'");
    expect(pyStrRepr("it's")).toBe(`"it's"`);
    expect(pyStrRepr(`it's "x"`)).toBe(`'it\\'s "x"'`);
    expect(pyStrRepr("a\nb\t\\")).toBe("'a\\nb\\t\\\\'");
    expect(pyStrRepr("\u0000\u007f\u200b é")).toBe("'\\x00\\x7f\\u200b é'");
  });

  it("str() and json.dumps of decoded JSON values", () => {
    expect(pyStr(18)).toBe("18");
    expect(pyStr(18.5)).toBe("18.5");
    expect(pyStr(true)).toBe("True");
    expect(pyStr(null)).toBe("None");
    expect(pyStr([1, "a"])).toBe("[1, 'a']");
    expect(pyJsonDumps({ result: "Tool execution failed: é" })).toBe('{"result": "Tool execution failed: \\u00e9"}');
  });
});

describe("Gsm8kTool (verl semantics)", () => {
  const schema = { type: "function", function: { name: "calc_gsm8k_reward", description: "d" } };
  const ctx = { signal: new AbortController().signal };

  async function submit(answer: unknown, groundTruth = "18") {
    const tool = new Gsm8kTool({ type: "native" }, schema);
    const { instanceId } = await tool.create(undefined, { create_kwargs: { ground_truth: groundTruth } });
    const result = await tool.execute(instanceId, answer === undefined ? {} : { answer }, ctx);
    await tool.release(instanceId);
    return { text: result.response.text, reward: result.reward };
  }

  it("answers with the f-string text and step rewards of a fresh instance", async () => {
    expect(await submit("18")).toEqual({ text: "Current parsed answer='18' reward=1.0", reward: 0.0 });
    expect(await submit("17")).toEqual({ text: "Current parsed answer='17' reward=0.0", reward: -0.05 });
    expect(await submit("#### 18")).toEqual({ text: "Current parsed answer='#### 18' reward=1.0", reward: 0.0 });
    expect(await submit("The answer is 18")).toEqual({ text: "Current parsed answer='The answer is 18' reward=1.0", reward: 0.0 });
  });

  it("prints the int 0 when nothing is parsed", async () => {
    expect(await submit("abc")).toEqual({ text: "Current parsed answer='abc' reward=0", reward: -0.05 });
    expect(await submit(undefined)).toEqual({ text: "Current parsed answer='' reward=0", reward: -0.05 });
  });

  it("uses flexible extraction: a trailing period or comma fails, a number argument is str()-ed", async () => {
    expect(await submit("18.")).toEqual({ text: "Current parsed answer='18.' reward=0.0", reward: -0.05 });
    expect(await submit("1,018", "1018")).toEqual({ text: "Current parsed answer='1,018' reward=0.0", reward: -0.05 });
    expect(await submit(18)).toEqual({ text: "Current parsed answer='18' reward=1.0", reward: 0.0 });
    // Python compares with the ground truth as given: an int ground truth never equals the extracted string.
    expect(await submit("18", 18 as unknown as string)).toEqual({ text: "Current parsed answer='18' reward=0.0", reward: -0.05 });
  });

  it("penalises a submission that does not improve on the same instance", async () => {
    const tool = new Gsm8kTool({ type: "native" }, schema);
    const { instanceId } = await tool.create("fixed-id", { ground_truth: "18" });
    expect(instanceId).toBe("fixed-id");
    expect((await tool.execute(instanceId, { answer: "17" }, ctx)).reward).toBe(-0.05);
    expect((await tool.execute(instanceId, { answer: "18" }, ctx)).reward).toBe(0.0);
    expect((await tool.execute(instanceId, { answer: "18" }, ctx)).reward).toBe(-0.05);
    expect(await tool.calcReward(instanceId)).toBe(1.0);
    await tool.release(instanceId);
    await expect(tool.calcReward(instanceId)).rejects.toThrow("'fixed-id'");
  });
});

describe("calculator", () => {
  it("evaluates with Python's precedence and operators", () => {
    const value = (e: string) => {
      const r = evaluateExpression(e);
      return r.ok ? r.value : r.error;
    };
    expect(value("(48 / 2) + 48")).toBe(72);
    expect(value("-2 ** 2")).toBe(-4);
    expect(value("2 ** 3 ** 2")).toBe(512);
    expect(value("7 // 2")).toBe(3);
    expect(value("-7 // 2")).toBe(-4);
    expect(value("-7 % 3")).toBe(2);
    expect(value("max(1, 5, 3) + sqrt(16)")).toBe(9);
    expect(value("1_000 * 2.5e-1")).toBe(250);
  });

  it("returns errors as data and never evaluates code", () => {
    const error = (e: string) => {
      const r = evaluateExpression(e);
      return r.ok ? `value ${r.value}` : r.error;
    };
    expect(error("1 / 0")).toBe("division by zero");
    expect(error("2 ^ 3")).toBe("unsupported operator '^' at position 2; use ** for powers");
    expect(error("process.exit(1)")).toBe("unexpected character \".\" at position 7");
    expect(error("constructor")).toBe("unknown name 'constructor' at position 0");
    expect(error("toString(1)")).toBe("unknown function 'toString' at position 0");
    expect(error("(1 + 2")).toBe("missing ')' for '(' at position 0");
    expect(error("10 ** 400")).toBe("result is not a finite number");
    expect(error("(".repeat(200) + "1" + ")".repeat(200))).toBe("expression nested too deeply");
    expect(error("")).toBe("empty expression");
  });
});

describe("truncateToolResponse (verl texts)", () => {
  const text = "abcdefghij";
  it("cuts left, right and middle with verl's markers", () => {
    expect(truncateToolResponse(text, 4, "left")).toBe("abcd...(truncated)");
    expect(truncateToolResponse(text, 4, "right")).toBe("(truncated)...ghij");
    expect(truncateToolResponse(text, 4, "middle")).toBe("ab...(truncated)...ij");
    expect(truncateToolResponse(text, 3, "middle")).toBe("a...(truncated)...j");
    expect(truncateToolResponse(text, 10, "left")).toBe(text);
  });

  it("keeps Python's s[-0:] edge and counts code points", () => {
    expect(truncateToolResponse(text, 0, "right")).toBe("(truncated)..." + text);
    expect(truncateToolResponse(text, 1, "middle")).toBe("...(truncated)..." + text);
    expect(truncateToolResponse("😀😀", 2, "left")).toBe("😀😀");
    expect(truncateToolResponse("😀😀😀", 2, "left")).toBe("😀😀...(truncated)");
  });
});

describe("tool YAML loading", () => {
  it("loads verl's gsm8k example unchanged and hands the template only the keys that were set", async () => {
    const registry = await loadToolRegistry(GSM8K_YAML);
    expect(registry.names()).toEqual(["calc_gsm8k_reward"]);
    expect(registry.schemas()).toEqual([
      {
        type: "function",
        function: {
          name: "calc_gsm8k_reward",
          description:
            "A tool for calculating the reward of gsm8k. (1.0 if parsed answer is correct, 0.0 if parsed answer is incorrect or not correctly parsed)",
          parameters: {
            type: "object",
            properties: { answer: { type: "string", description: "The model's answer to the GSM8K math problem, must be a digits" } },
            required: ["answer"],
          },
        },
      },
    ]);
    await registry.close();
  });

  it("loads the calculator and python configs", async () => {
    const calc = await loadToolRegistry(path.join(REPO_ROOT, "tool-configs", "calculator_tool_config.yaml"));
    expect(calc.names()).toEqual(["calculator"]);
    expect(calc.settingsOf("calculator")).toEqual({ timeoutMs: 5000, maxConcurrency: 64 });
    const py = await loadToolRegistry(path.join(REPO_ROOT, "tool-configs", "python_code_tool_config.yaml"));
    expect(py.names()).toEqual(["code_interpreter"]);
    expect(py.settingsOf("code_interpreter")).toEqual({ timeoutMs: 15000, maxConcurrency: 4 });
  });

  it("drops keys pydantic would ignore, like the search tool's `item:`", async () => {
    const file = yamlFile(`tools:
  - class_name: agentrl.tools.CalculatorTool
    config: {type: native}
    tool_schema:
      type: function
      function:
        name: calc
        description: d
        parameters: {type: object, properties: {q: {type: array, item: {type: string}}}, required: [q]}
`);
    const registry = await loadToolRegistry(file);
    expect(registry.schemas()[0]).toEqual({
      type: "function",
      function: { name: "calc", description: "d", parameters: { type: "object", properties: { q: { type: "array" } }, required: ["q"] } },
    });
  });

  const bad: Array<[string, string, RegExp]> = [
    ["unknown class_name", nativeEntry("my.pkg.FancyTool", "x"), /tools\.0\.class_name: unknown tool class "my\.pkg\.FancyTool"/],
    ["missing tool_schema", `tools:\n  - class_name: agentrl.tools.CalculatorTool\n    config: {type: native}\n`, /tools\.0\.tool_schema: required for a native tool/],
    ["missing config", `tools:\n  - class_name: agentrl.tools.CalculatorTool\n`, /tools\.0\.config: /],
    ["wrong config.type", nativeEntry("agentrl.tools.CalculatorTool", "x", "type: python"), /tools\.0\.config\.type: /],
    ["wrong name type", nativeEntry("agentrl.tools.CalculatorTool", "5").replace("name: 5", "name: [5]"), /tools\.0\.tool_schema\.function\.name: /],
    ["missing tools key", "tool: []\n", /tools: /],
    ["tools not a list", "tools: {a: 1}\n", /tools: /],
    ["bad YAML", "tools: [\n", /not valid YAML/],
    ["python config wrong type", nativeEntry("agentrl.tools.PythonCodeTool", "py", 'type: native, timeout_s: "ten"'), /tools\.0: config\.timeout_s: /],
    ["mcp without mcp block", `tools:\n  - class_name: verl.tools.mcp_base_tool.MCPBaseTool\n    config: {type: mcp}\n`, /tools\.0\.mcp: required/],
  ];
  it.each(bad)("names file and path for %s", async (_label, text, message) => {
    const file = yamlFile(text);
    const error = await loadToolRegistry(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputError);
    expect((error as InputError).message).toContain(file);
    expect((error as InputError).message).toMatch(message);
  });

  it("refuses SandboxFusionTool with a pointer to the local interpreter", async () => {
    const error = (await loadToolRegistry(yamlFile(nativeEntry("verl.tools.sandbox_fusion_tools.SandboxFusionTool", "code"))).catch((e) => e)) as InputError;
    expect(error.hint).toMatch(/agentrl\.tools\.PythonCodeTool/);
  });

  it("refuses duplicate tool names", async () => {
    const text = nativeEntry("agentrl.tools.CalculatorTool", "dup") + nativeEntry("agentrl.tools.CalculatorTool", "dup").replace("tools:\n", "");
    await expect(loadToolRegistry(yamlFile(text))).rejects.toThrow(/duplicate tool name "dup"/);
  });
});

describe("tool modules (security)", () => {
  it("refuses a module path when no module directory is allowed", async () => {
    const file = yamlFile(nativeEntry(`${MODULES}/word-count-tool.mjs#WordCountTool`, "wc"));
    await expect(loadToolRegistry(file)).rejects.toThrow(/is a module path, and no module directory is allowed/);
  });

  it("refuses a module outside the allowed directories without loading it", async () => {
    const file = yamlFile(nativeEntry(`${OUTSIDE}/escape-tool.mjs`, "esc"));
    await expect(loadToolRegistry(file, { moduleDirs: [MODULES] })).rejects.toThrow(/outside the allowed module directories/);
    // A relative path climbing out of the allowed directory is refused the same way.
    const sneaky = yamlFile(nativeEntry(`${MODULES}/../outside-modules/escape-tool.mjs`, "esc"));
    await expect(loadToolRegistry(sneaky, { moduleDirs: [MODULES] })).rejects.toThrow(/outside the allowed module directories/);
    expect((globalThis as Record<string, unknown>)["__agentrlEscapeLoaded"]).toBeUndefined();
  });

  it("refuses a symlink inside an allowed directory that points outside it", async () => {
    const allowed = tempDir("allowed");
    symlinkSync(path.join(OUTSIDE, "escape-tool.mjs"), path.join(allowed, "innocent.mjs"));
    const file = yamlFile(nativeEntry(path.join(allowed, "innocent.mjs"), "inn"));
    await expect(loadToolRegistry(file, { moduleDirs: [allowed] })).rejects.toThrow(/outside the allowed module directories/);
    expect((globalThis as Record<string, unknown>)["__agentrlEscapeLoaded"]).toBeUndefined();
    rmSync(allowed, { recursive: true, force: true });
  });

  it("loads a tool class from an allowed directory and runs it", async () => {
    const registry = await loadToolRegistry(yamlFile(nativeEntry(`${MODULES}/word-count-tool.mjs#WordCountTool`, "wc")), { moduleDirs: [MODULES] });
    const outcome = await runToolCall(registry, { name: "wc", arguments: '{"text": "one two three"}' });
    expect(outcome).toMatchObject({ text: "words=3", reward: 0.5, metrics: { errorKind: null, tool: { words: 3 } } });
  });

  it("rejects an export that is not a tool, or missing", async () => {
    await expect(loadToolRegistry(yamlFile(nativeEntry(`${MODULES}/word-count-tool.mjs#NotATool`, "n")), { moduleDirs: [MODULES] })).rejects.toThrow(
      /does not implement the tool lifecycle/,
    );
    await expect(loadToolRegistry(yamlFile(nativeEntry(`${MODULES}/word-count-tool.mjs#Nope`, "n")), { moduleDirs: [MODULES] })).rejects.toThrow(
      /has no export "Nope"/,
    );
  });
});

describe("runToolCall", () => {
  let gsm8k: ToolRegistry;
  let faulty: ToolRegistry;
  const kwargs = { calc_gsm8k_reward: { create_kwargs: { ground_truth: "18" } } };

  beforeAll(async () => {
    gsm8k = await loadToolRegistry(GSM8K_YAML);
    const entries = [
      ["ThrowingTool", "thrower", "type: native"],
      ["HangingTool", "hanger", "type: native, call_timeout_s: 0.2"],
      ["HugeOutputTool", "huge", "type: native"],
      ["BadUnicodeTool", "badutf", "type: native"],
      ["SlowTool", "slow", "type: native, rate_limit: 2"],
      ["SlowCreateTool", "slowcreate", "type: native, call_timeout_s: 0.1"],
      ["BadMediaTool", "badmedia", "type: native"],
      ["LateSignalReaderTool", "latereader", "type: native"],
    ]
      .map(([cls, name, config]) => nativeEntry(`${MODULES}/misbehaving-tools.mjs#${cls}`, name as string, config as string).replace("tools:\n", ""))
      .join("");
    faulty = await loadToolRegistry(yamlFile("tools:\n" + entries), { moduleDirs: [MODULES] });
  });
  afterAll(async () => {
    await gsm8k.close();
    await faulty.close();
  });

  it("runs create → execute → release with the sample's create_kwargs", async () => {
    const outcome = await runToolCall(gsm8k, { name: "calc_gsm8k_reward", arguments: '{"answer": "18"}' }, kwargs);
    expect(outcome.text).toBe("Current parsed answer='18' reward=1.0");
    expect(outcome.reward).toBe(0.0);
    expect(outcome.metrics.errorKind).toBeNull();
    const wrong = await runToolCall(gsm8k, { name: "calc_gsm8k_reward", arguments: { answer: "17" } }, kwargs);
    expect([wrong.text, wrong.reward]).toEqual(["Current parsed answer='17' reward=0.0", -0.05]);
  });

  it("turns bad arguments and unknown tools into verl's error observation", async () => {
    const badJson = await runToolCall(gsm8k, { name: "calc_gsm8k_reward", arguments: "{answer: 18" }, kwargs);
    expect(badJson.text).toMatch(/^Error when executing tool: /);
    expect([badJson.reward, badJson.metrics.errorKind]).toEqual([0.0, "bad_arguments"]);
    const notObject = await runToolCall(gsm8k, { name: "calc_gsm8k_reward", arguments: "[1]" }, kwargs);
    expect(notObject.text).toBe("Error when executing tool: tool arguments must be a JSON object");
    const unknown = await runToolCall(gsm8k, { name: "calc", arguments: "{}" }, kwargs);
    expect(unknown.text).toBe("Error when executing tool: 'calc'");
    expect(unknown.metrics.errorKind).toBe("unknown_tool");
  });

  it("survives a tool that throws, and still releases it", async () => {
    const outcome = await runToolCall(faulty, { name: "thrower", arguments: "{}" });
    expect(outcome.text).toBe("Error when executing tool: boom from tool");
    expect([outcome.reward, outcome.metrics.errorKind]).toEqual([0.0, "exception"]);
    expect((faulty.get("thrower") as unknown as { released: string[] }).released).toHaveLength(1);
  });

  it("times out a hanging tool, aborts its signal and releases it", async () => {
    const outcome = await runToolCall(faulty, { name: "hanger", arguments: "{}" });
    expect(outcome.text).toBe("Error when executing tool: timed out after 200 ms");
    expect(outcome.metrics.errorKind).toBe("timeout");
    const tool = faulty.get("hanger") as unknown as { sawAbort: boolean; released: string[] };
    expect(tool.sawAbort).toBe(true);
    expect(tool.released).toHaveLength(1);
  });

  it("releases an instance whose create finished after the timeout", async () => {
    const outcome = await runToolCall(faulty, { name: "slowcreate", arguments: "{}" });
    expect(outcome.metrics.errorKind).toBe("timeout");
    const tool = faulty.get("slowcreate") as unknown as { released: string[] };
    expect(tool.released).toHaveLength(0);
    await new Promise((r) => setTimeout(r, 400));
    expect(tool.released).toHaveLength(1);
  });

  it("refuses huge and non-UTF-8 output", async () => {
    const huge = await runToolCall(faulty, { name: "huge", arguments: "{}" });
    expect(huge.text).toBe("Error when executing tool: output of 5000000 characters exceeds the limit of 1000000");
    expect(huge.metrics.errorKind).toBe("output_too_large");
    const bad = await runToolCall(faulty, { name: "badutf", arguments: "{}" });
    expect(bad.text).toBe("Error when executing tool: output is not valid UTF-8");
    expect(bad.metrics.errorKind).toBe("invalid_output");
    const media = await runToolCall(faulty, { name: "badmedia", arguments: "{}" });
    expect(media.text).toBe("Error when executing tool: response.image must be a list");
  });

  it("applies verl's truncation when asked", async () => {
    const outcome = await runToolCall(gsm8k, { name: "calc_gsm8k_reward", arguments: '{"answer": "18"}' }, kwargs, {
      maxToolResponseLength: 10,
      toolResponseTruncateSide: "left",
    });
    expect(outcome.text).toBe("Current pa...(truncated)");
    expect(outcome.metrics.truncatedFromChars).toBe(37);
  });

  it("holds each tool to its concurrency limit", async () => {
    const outcomes = await Promise.all(Array.from({ length: 6 }, () => runToolCall(faulty, { name: "slow", arguments: "{}" })));
    expect(outcomes.every((o) => o.text === "done")).toBe(true);
    const { SlowTool } = (await import(`${MODULES}/misbehaving-tools.mjs`)) as { SlowTool: { peak: number } };
    expect(SlowTool.peak).toBe(2);
    expect(outcomes.some((o) => o.metrics.queueMs > 0)).toBe(true);
  });

  it("gives a tool that reads its signal after the caller cancelled an aborted one, and a finished call's a live one", async () => {
    const tool = faulty.get("latereader") as unknown as { signalAborted?: boolean };
    const controller = new AbortController();
    const pending = runToolCall(faulty, { name: "latereader", arguments: "{}" }, {}, { signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    expect((await pending).metrics.errorKind).toBe("cancelled");
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(tool.signalAborted).toBe(true);
    const finished = await runToolCall(faulty, { name: "latereader", arguments: "{}" });
    expect(finished.text).toBe("done late");
    expect(tool.signalAborted).toBe(false);
  });

  it("stops waiting when the caller cancels", async () => {
    const controller = new AbortController();
    const pending = runToolCall(faulty, { name: "hanger", arguments: "{}" }, {}, { signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    const outcome = await pending;
    expect(outcome.metrics.errorKind).toBe("cancelled");
    expect(outcome.text).toBe("Error when executing tool: the call was cancelled");
  });
});

