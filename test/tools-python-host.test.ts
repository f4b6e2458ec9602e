/**
 * Python tool classes from verl YAML (src/tools/python-host*.ts, worker/agentrl_worker/tool_host.py): a verl-style
 * Gsm8kTool file, a dotted-path class and a JS module in one YAML; instance lifetime through ToolSession; a crashing
 * host (os._exit) and hanging calls; start-up errors; and `agentrl rollout` end to end against the fake SGLang server
 * with the Python tool mixed with a JS tool. The hosts run under bubblewrap (the default) unless a test says otherwise.
 */
import { cpSync, readdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { InputError } from "../src/errors.js";
import { loadToolRegistry, runToolCall, ToolSession, type ToolRegistry } from "../src/tools/index.js";
import { pythonClassPath } from "../src/tools/python-host-tool.js";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { tempDir } from "./helpers/tmp.js";
import { GSM8K_DIR, readAllTrajectories } from "./helpers/rollout-run.js";
import { IM_END, QWEN3_DIR } from "./helpers/qwen3.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { loadChatModel } from "../src/chat/index.js";

const FIXTURES = path.join(REPO_ROOT, "test/fixtures/python-tools");
const schema = (name: string, props: Record<string, unknown> = {}) =>
  `{type: function, function: {name: ${name}, description: d, parameters: {type: object, properties: ${JSON.stringify(props)}, required: []}}}`;
const GSM8K_ENTRY = `  - class_name: gsm8k_tool.py#Gsm8kTool\n    config: {type: native}\n    tool_schema: ${schema("calc_gsm8k_reward", { answer: { type: "string" } })}\n`;
const entry = (className: string, name: string, config = "{type: native}") => `  - class_name: ${className}\n    config: ${config}\n    tool_schema: ${schema(name)}\n`;

/** A folder with the Python fixtures and the JS word-count module, and a tool YAML holding `entries`. */
function toolFolder(entries: string): string {
  const dir = tempDir("pyhost");
  cpSync(FIXTURES, dir, { recursive: true });
  cpSync(path.join(REPO_ROOT, "test/fixtures/tool-modules/word-count-tool.mjs"), path.join(dir, "word-count-tool.mjs"));
  writeFileSync(path.join(dir, "tools.yaml"), `tools:\n${entries}`);
  return dir;
}

async function load(entries: string): Promise<ToolRegistry> {
  const dir = toolFolder(entries);
  return loadToolRegistry(path.join(dir, "tools.yaml"), { moduleDirs: [dir] });
}

// This file's hosts make their scratch folders in a temp folder of its own: the checks of what is left must not see
// the scratch folders of the CLIs that another test file runs meanwhile.
const suiteTmp = process.env.TMPDIR;
process.env.TMPDIR = tempDir("pyhost-tmp");

const registries: ToolRegistry[] = [];
afterAll(async () => {
  try {
    await Promise.all(registries.map((r) => r.close()));
    // Every host removed its scratch folder.
    expect(readdirSync(os.tmpdir()).filter((name) => name.startsWith("agentrl-host-"))).toEqual([]);
  } finally {
    if (suiteTmp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = suiteTmp;
  }
});

async function loaded(entries: string): Promise<ToolRegistry> {
  const registry = await load(entries);
  registries.push(registry);
  return registry;
}

const call = (registry: ToolRegistry, name: string, args: Record<string, unknown>, session?: ToolSession) =>
  runToolCall(registry, { name, arguments: args }, {}, { session });

describe("which class_name is Python", () => {
  it.each([
    ["tools/gsm8k.py#Gsm8kTool", { file: "tools/gsm8k.py", className: "Gsm8kTool" }],
    ["gsm8k.py:Gsm8kTool", { file: "gsm8k.py", className: "Gsm8kTool" }],
    ["my_pkg.tools.Gsm8kTool", { dotted: "my_pkg.tools.Gsm8kTool" }],
    ["weather.mjs", null],
    ["tools/weather.js#WeatherTool", null],
    ["Gsm8kTool", null],
  ])("%s", (className, expected) => {
    expect(pythonClassPath(className)).toEqual(expected);
  });
});

describe("a registry mixing Python and JS tools", () => {
  let registry: ToolRegistry;
  beforeAll(async () => {
    registry = await loaded(
      GSM8K_ENTRY +
        entry("my_tools.counting.CountingTool", "counting") +
        entry("word-count-tool.mjs#WordCountTool", "word_count") +
        entry("misbehaving.py#TrickyTool", "tricky", "{type: native, call_timeout_s: 1, tool_host: {workers: 2}}"),
    );
  });

  it("loads all four, schemas included", () => {
    expect(registry.names()).toEqual(["calc_gsm8k_reward", "counting", "word_count", "tricky"]);
    expect(registry.schemas().map((s) => (s as { function: { name: string } }).function.name)).toEqual(registry.names());
  });

  it("keeps an instance for the whole trajectory: create_kwargs, execute, calc_reward, release", async () => {
    const session = new ToolSession(registry, { calc_gsm8k_reward: { create_kwargs: { ground_truth: "18" } }, counting: { create_kwargs: { start: 10 } } }, { timeoutMs: 10_000 });
    await session.start();
    const texts = [];
    for (const answer of ["17", "18", "18"]) texts.push(await call(registry, "calc_gsm8k_reward", { answer }, session));
    expect(texts.map((t) => [t.text, t.reward])).toEqual([
      ["Current parsed answer='17' reward=0.0", -0.05],
      ["Current parsed answer='18' reward=1.0", 0.0],
      ["Current parsed answer='18' reward=1.0", -0.05],
    ]);
    expect((await call(registry, "counting", {}, session)).text).toBe("seen 11");
    expect((await call(registry, "word_count", { text: "a b c" }, session)).text).toBe("words=3");
    expect(await session.scores()).toEqual({ calc_gsm8k_reward: 1, counting: 11, word_count: 0 });
    await session.release();
    expect((await call(registry, "calc_gsm8k_reward", { answer: "18" }, session)).text).toMatch(/already released/);
  });

  it("passes execute_kwargs and agent data, and turns a raise into an error observation", async () => {
    const echo = await runToolCall(registry, { name: "tricky", arguments: { mode: "echo" } }, { tricky: { execute_kwargs: { k: 1 } } }, {
      agentData: { trajectoryId: "4:1", turn: 2, messages: [] },
    });
    expect(echo.text).toBe("{'kwargs': {'k': 1}, 'trajectory_id': '4:1', 'turn': 2}");
    const raised = await call(registry, "tricky", { mode: "raise" });
    expect([raised.text, raised.metrics.errorKind]).toEqual(["Error when executing tool: ValueError: asked to raise", "exception"]);
  });

  it("a crash fails the call with a clear error, loses the trajectory's instance, and the restarted host serves later calls", async () => {
    const session = new ToolSession(registry, { tricky: {} }, { timeoutMs: 10_000 });
    await session.start();
    expect((await call(registry, "tricky", {}, session)).text).toBe("count=1");
    const crashed = await call(registry, "tricky", { mode: "crash" }, session);
    expect(crashed.metrics.errorKind).toBe("exception");
    expect(crashed.text).toMatch(/^Error when executing tool: the Python tool host of tricky \(misbehaving\.py#TrickyTool\) exited \(exit code 7\) during execute\. The 1 tool instance\(s\) it held are gone/);
    const lost = await call(registry, "tricky", {}, session);
    expect(lost.text).toMatch(/tool instance .* of tricky was lost when its Python tool host exited/);
    await session.release();
    const fresh = await call(registry, "tricky", {});
    expect([fresh.text, fresh.metrics.errorKind]).toEqual(["count=1", null]);
  });

  it("a call past call_timeout_s is a timeout; an async one is cancelled in place, a blocking one gets its host restarted", async () => {
    const before = (await call(registry, "tricky", {})).metrics.tool["pid"];
    const slept = await call(registry, "tricky", { mode: "sleep", seconds: 30 });
    expect([slept.metrics.errorKind, slept.text]).toEqual(["timeout", "Error when executing tool: timed out after 1000 ms"]);
    const warnings: string[] = [];
    const spy = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => (warnings.push(String(chunk)), true));
    const started = performance.now();
    const blocked = await call(registry, "tricky", { mode: "block", seconds: 30 });
    expect(blocked.metrics.errorKind).toBe("timeout");
    expect(performance.now() - started).toBeLessThan(5_000);
    // The blocked host does not answer its cancel: 2 s later it is killed (and restarted).
    await vi.waitFor(() => expect(warnings.join("")).toMatch(/tool host of tricky did not stop a call that ran past its limit; it was killed and restarted/), { timeout: 5_000 });
    spy.mockRestore();
    // Both hosts answer afterwards (one of them restarted after the blocking call).
    const after = await Promise.all([call(registry, "tricky", {}), call(registry, "tricky", {})]);
    expect(after.map((a) => a.text)).toEqual(["count=1", "count=1"]);
    expect(typeof before).toBe("number");
  });
});

describe("start-up errors name the YAML entry, the file and the class (InputError, exit 2)", () => {
  it.each([
    ["a syntax error", entry("broken_syntax.py#Broken", "b"), /tools\.yaml: tools\.0\.class_name: cannot import Python tool class broken_syntax\.py#Broken: .*SyntaxError.*broken_syntax\.py/],
    ["a missing class", entry("misbehaving.py#NoSuchTool", "b"), /tools\.0\.class_name: Python tool class misbehaving\.py#NoSuchTool: no class NoSuchTool; it defines: .*TrickyTool/],
    ["not a class", entry("my_tools.counting.BaseTool_", "b"), /tools\.0\.class_name: Python tool class my_tools\.counting\.BaseTool_: no class BaseTool_/],
    ["an unknown module", entry("nowhere.pkg.Tool", "b"), /tools\.0\.class_name: unknown tool class "nowhere\.pkg\.Tool": not a built-in, and Python cannot import it: ModuleNotFoundError/],
    ["a file outside the YAML's folder", entry("../escape.py#Tool", "b"), /outside the allowed module directories|not found/],
    ["bwrap missing without sandbox: none", entry("misbehaving.py#TrickyTool", "b", "{type: native, tool_host: {bwrap: /nonexistent/bwrap}}"), /tools\.0\.config\.tool_host\.sandbox: .*sandbox: none/],
  ])("%s", async (_what, entries, message) => {
    const failure = await load(entries).then(
      () => new Error("loaded"),
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(InputError);
    expect(failure).toMatchObject({ exitCode: 2, message: expect.stringMatching(message) });
  });
});

describe("agentrl rollout with the Python gsm8k tool and a JS tool in one YAML", () => {
  let fake: FakeSglang;
  const data = tempDir("pyhost-data");
  const out = path.join(tempDir("pyhost-out"), "traj.jsonl");
  let result: Awaited<ReturnType<typeof runCli>>;
  let dir: string;

  beforeAll(async () => {
    const model = await loadChatModel(QWEN3_DIR);
    const toolResponse = model.tokenToId("<tool_response>")!;
    const turn = (text: string) => [...model.encode(text), IM_END];
    const turns = [
      turn('<tool_call>\n{"name": "word_count", "arguments": {"text": "two words"}}\n</tool_call>'),
      turn('<tool_call>\n{"name": "calc_gsm8k_reward", "arguments": {"answer": "18"}}\n</tool_call>'),
      turn("#### 18"),
    ];
    fake = await startFakeSglang({ respond: (ids) => turns[Math.min(2, ids.filter((id) => id === toolResponse).length)]! });
    expect((await runCli(["preprocess", "gsm8k", "-i", GSM8K_DIR, "-o", data, "--split", "test", "--limit", "2"])).code).toBe(0);
    dir = toolFolder(GSM8K_ENTRY + entry("word-count-tool.mjs#WordCountTool", "word_count"));
    result = await runCli(["rollout", "--data", path.join(data, "test.parquet"), "--model", QWEN3_DIR, "--server", fake.url, "--tools", path.join(dir, "tools.yaml"), "--n", "2", "--out", out, "--json"]);
  });
  afterAll(async () => fake?.close());

  it("runs both tools in every trajectory and records the Python tool's text, step reward and score", async () => {
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const all = await readAllTrajectories(out);
    expect(all).toHaveLength(4);
    const first = all.find((t) => t.id === "0:0")!;
    expect(first.calls.map((c) => [c.name, c.response, c.step_reward])).toEqual([
      ["word_count", "words=2", 0.5],
      ["calc_gsm8k_reward", "Current parsed answer='18' reward=1.0", 0],
    ]);
    expect(first.tool_scores).toMatchObject({ calc_gsm8k_reward: 1 });
    expect(all.filter((t) => t.data_index === 1).map((t) => t.tool_scores!["calc_gsm8k_reward"])).toEqual([0, 0]);
  });

  it("a syntax error in the tool file stops the run at start-up with exit 2, naming the file and class", async () => {
    const broken = toolFolder(entry("broken_syntax.py#Broken", "b"));
    const run = await runCli(["rollout", "--data", path.join(data, "test.parquet"), "--model", QWEN3_DIR, "--server", fake.url, "--tools", path.join(broken, "tools.yaml"), "--out", path.join(broken, "o.jsonl")]);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/tools\.yaml: tools\.0\.class_name: cannot import Python tool class broken_syntax\.py#Broken: .*SyntaxError/);
  });
});

describe("a bad interpreter", () => {
  it("is an InputError naming the entry and the interpreter, leaving no scratch folder", async () => {
    const scratch = () => readdirSync(os.tmpdir()).filter((name) => name.startsWith("agentrl-host-"));
    const before = scratch();
    const failure = await load(entry("misbehaving.py#TrickyTool", "t", "{type: native, tool_host: {python: /nonexistent/python3}}")).then(
      () => new Error("loaded"),
      (err: unknown) => err,
    );
    expect(failure).toMatchObject({ exitCode: 2, message: expect.stringMatching(/tools\.0: cannot start the Python tool host for misbehaving\.py#TrickyTool with \/nonexistent\/python3/) });
    expect(scratch()).toEqual(before);
  });
});
