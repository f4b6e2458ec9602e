/**
 * `agentrl sft` (issue 14, part 1), run as a user runs it:
 * - the tokens and loss mask of a conversation are exactly what `agentrl template --json` shows for it (one
 *   tokenization path), on the real Qwen3 template with a tool call and a tool response;
 * - bad rows fail before any worker starts, exit 2, naming the file, the row and the field;
 * - conversations over data.max_length: error, right (cut, counted) or drop (skipped, counted);
 * - trajectory files are filtered by status and data.min_reward (rejection-sampling fine-tuning);
 * - a short run on the CPU demo's model lowers the loss, reports the validation loss, writes a Hugging Face folder,
 *   and --resume after it continues from the checkpoint with every step logged once.
 * The first bad-input case runs the built CLI in its own process, the others the same command line through the CLI's
 * main() in the test process (runCliInProcess: the same exit code and message, without a Node start-up each). The
 * Qwen3 chat model the example checks tokenize with is loaded once and shared.
 */
import { readdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { runCliInProcess } from "./helpers/in-process-cli.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { loadChatModel } from "../src/chat/index.js";
import { sftConfigSchema } from "../src/sft/config.js";
import { loadExamples } from "../src/sft/examples.js";
import { openTrajectoryWriter } from "../src/data/trajectory-store.js";
import { makeTrajectory } from "./helpers/trajectories.js";
import { load as loadYaml } from "js-yaml";
import { VAULT_TOOL_SCHEMA, vaultDemonstration } from "../src/data/vault.js";
import { tempDir } from "./helpers/tmp.js";

const scratch = tempDir("sft");

/** The Qwen3 chat model, loaded once for the checks that tokenize (loadExamples only reads it). */
let qwen3: ReturnType<typeof loadChatModel> | undefined;
const chatModel = () => (qwen3 ??= loadChatModel(QWEN3_DIR));

const TOOLS = [
  {
    type: "function",
    function: {
      name: "calc_gsm8k_reward",
      description: "grade an answer",
      parameters: { type: "object", properties: { answer: { type: "string" } }, required: ["answer"] },
    },
  },
];
const CONVERSATION = [
  { role: "system", content: "You are a careful math tutor." },
  { role: "user", content: "What is 3 + 4? Check it with the tool." },
  {
    role: "assistant",
    content: "Let me check.",
    tool_calls: [{ type: "function", function: { name: "calc_gsm8k_reward", arguments: { answer: "7" } } }],
  },
  { role: "tool", content: "Current parsed answer=7 reward=1.0" },
  { role: "assistant", content: "The answer is #### 7" },
];

function writeJsonl(name: string, rows: unknown[]): string {
  const file = path.join(scratch, name);
  writeFileSync(file, rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
  return file;
}

function config(overrides: Record<string, unknown> = {}) {
  const { data, ...rest } = overrides as { data?: Record<string, unknown> };
  return sftConfigSchema.parse({ data: { train_files: "x.jsonl", ...data }, model: { partial_pretrain: QWEN3_DIR }, ...rest });
}

describe("sft examples", () => {
  it("gives each conversation the tokens and loss mask that `agentrl template --json` shows", async () => {
    const data = writeJsonl("one.jsonl", [{ messages: CONVERSATION, tools: TOOLS }]);
    const messagesFile = path.join(scratch, "one.json");
    writeFileSync(messagesFile, JSON.stringify({ messages: CONVERSATION, tools: TOOLS }));
    const shown = await runCli(["template", "--model", QWEN3_DIR, "--messages", messagesFile, "--json"]);
    expect(shown.code, shown.stderr).toBe(0);
    const template = JSON.parse(shown.stdout) as { ids: number[]; mask: number[] };
    const model = await chatModel();
    const { examples, counts } = await loadExamples(model, [data], config());
    expect(counts).toMatchObject({ rows: 1, kept: 1, truncated: 0, dropped: 0 });
    expect(examples[0]!.ids).toEqual(template.ids);
    expect(examples[0]!.lossMask).toEqual(template.mask);
    // The loss covers both assistant turns and nothing of the system, user or tool text.
    const trained = model.decode(examples[0]!.ids.filter((_, i) => examples[0]!.lossMask[i] === 1));
    expect(trained).toContain("Let me check.");
    expect(trained).toContain("The answer is #### 7");
    expect(trained).not.toContain("careful math tutor");
    expect(trained).not.toContain("reward=1.0");
  });

  it("applies data.truncation to conversations over data.max_length, and counts them", async () => {
    const short = { messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "hello" }] };
    const long = { messages: CONVERSATION, tools: TOOLS };
    const data = writeJsonl("mixed.jsonl", [short, long, short]);
    const model = await chatModel();
    const full = (await loadExamples(model, [data], config({ data: { max_length: 100000 } }))).examples;
    const shortLength = full[0]!.ids.length;
    // Cuts the long conversation inside its last turn, so it keeps loss tokens of its first assistant turn.
    const max = full[1]!.ids.length - 3;
    expect(shortLength).toBeLessThan(max);

    const dropped = await loadExamples(model, [data], config({ data: { max_length: max, truncation: "drop" } }));
    expect(dropped.counts).toMatchObject({ rows: 3, kept: 2, dropped: 1, truncated: 0 });

    const cut = await loadExamples(model, [data], config({ data: { max_length: max, truncation: "right" } }));
    expect(cut.counts).toMatchObject({ rows: 3, kept: 3, truncated: 1, dropped: 0 });
    expect(cut.examples.map((e) => e.ids.length)).toEqual([shortLength, max, shortLength]);

    await expect(loadExamples(model, [data], config({ data: { max_length: max } }))).rejects.toThrow(
      new RegExp(`mixed\\.jsonl: line 2: \\d+ tokens, over data\\.max_length ${max}`),
    );
  });

  it.each(["jsonl", "parquet"])("keeps completed trajectories at or above data.min_reward, with their exact token record (.%s)", async (ext) => {
    const file = path.join(scratch, `rollout.${ext}`);
    const writer = await openTrajectoryWriter(file, { force: true });
    const trajectories = [
      makeTrajectory(0, { reward: 1, status: "completed" }),
      makeTrajectory(2, { reward: 0, status: "completed" }),
      makeTrajectory(4, { reward: 1, status: "truncated" }),
    ];
    for (const t of trajectories) await writer.write(t);
    await writer.close();
    const model = await chatModel();
    const { examples, counts } = await loadExamples(model, [file], config({ data: { min_reward: 1 } }));
    expect(counts).toMatchObject({ rows: 3, kept: 1, filtered: 2 });
    const t = trajectories[0]!;
    expect(examples[0]!.ids).toEqual([...t.prompt_ids, ...t.response_ids]);
    expect(examples[0]!.lossMask).toEqual([...t.prompt_ids.map(() => 0), ...t.response_mask]);
  });

  it("reads trajectory files of format 1 (JSON text fields) too", async () => {
    const model = await chatModel();
    const file = path.join(REPO_ROOT, "test", "fixtures", "trajectories-format1", "format1.parquet");
    const { examples, counts } = await loadExamples(model, [file], config({ data: { min_reward: 1 } }));
    expect(counts).toMatchObject({ rows: 3, kept: 1, filtered: 2 });
    expect(examples[0]!.ids).toEqual([1, 2, 3, 10, 11, 12, 13, 14]);
  });
});

describe("the CPU demo's demonstrations", () => {
  it("carry the tool schema of the demo's tool config, and are what `preprocess vault --demos 1000 --demo-accuracy 0.3` writes", async () => {
    const toolConfig = loadYaml(readFileSync(path.join(REPO_ROOT, "examples", "cpu-demo", "vault_tool_config.yaml"), "utf8")) as {
      tools: Array<{ tool_schema: unknown }>;
    };
    expect(VAULT_TOOL_SCHEMA).toEqual(toolConfig.tools[0]!.tool_schema);
    const committed = readFileSync(path.join(REPO_ROOT, "examples", "cpu-demo", "data", "sft.jsonl"), "utf8").trim().split("\n");
    expect(committed).toHaveLength(1000);
    expect(committed.map((line) => JSON.parse(line))).toEqual(committed.map((_, i) => vaultDemonstration("train", i, 0, 0.3)));
  });

  it("come from a teacher that answers the code with the given accuracy and otherwise the next digit", () => {
    const answers = (accuracy: number) =>
      Array.from({ length: 2000 }, (_, i) => {
        const messages = vaultDemonstration("train", i, 7, accuracy).messages as Array<{ role: string; content: string }>;
        return { user: messages[0]!.content, code: messages[2]!.content, answer: messages[3]!.content };
      });
    const exact = answers(1);
    const noisy = answers(0.3);
    expect(exact.every((a) => a.answer === a.code)).toBe(true);
    // The vaults themselves do not depend on the teacher: same prompts, same codes.
    expect(noisy.map(({ user, code }) => [user, code])).toEqual(exact.map(({ user, code }) => [user, code]));
    const right = noisy.filter((a) => a.answer === a.code).length / noisy.length;
    expect(right).toBeGreaterThan(0.27);
    expect(right).toBeLessThan(0.33);
    const wrong = noisy.filter((a) => a.answer !== a.code);
    expect(wrong.every((a) => a.answer === String((Number(a.code) + 1) % 10))).toBe(true);
    expect(answers(0).every((a) => a.answer !== a.code)).toBe(true);
  });
});

describe("agentrl sft, bad input", () => {
  const configFile = (data: string, extra = "") => {
    const file = path.join(scratch, `bad-${path.basename(data)}.yaml`);
    writeFileSync(file, `data:\n  train_files: ${data}\n${extra}model:\n  partial_pretrain: ${QWEN3_DIR}\ntrainer:\n  default_local_dir: ${path.join(scratch, "bad-run")}\n`);
    return file;
  };
  const cases: Array<[string, unknown[], RegExp]> = [
    [
      "a message without a role",
      [{ messages: [{ role: "user", content: "hi" }, { content: "hello" }] }],
      /no-role\.jsonl: line 1: messages\[1\]\.role: /,
    ],
    [
      "a tool call whose name is not in tools",
      [{ messages: [CONVERSATION[1], { role: "assistant", content: "", tool_calls: [{ function: { name: "calculator", arguments: {} } }] }], tools: TOOLS }],
      /unknown-tool\.jsonl: line 1: messages\[1\]\.tool_calls\[0\]\.function\.name: "calculator" is not in tools \(calc_gsm8k_reward\)/,
    ],
    [
      "a row without the messages column",
      [{ conversation: CONVERSATION }],
      /no-messages\.jsonl: line 1: no messages column/,
    ],
  ];
  const names = ["no-role", "unknown-tool", "no-messages"];
  it.each(cases.map((c, i) => [...c, names[i]!] as const))("%s: exit 2 naming the file, row and field", async (_what, rows, message, name) => {
    const data = writeJsonl(`${name}.jsonl`, rows);
    const run = name === names[0] ? runCli : runCliInProcess;
    const result = await run(["sft", "--config", configFile(data)]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
    expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(existsSync(path.join(scratch, "bad-run"))).toBe(false); // nothing created before the input was read
  });
});

describe("agentrl sft on the CPU demo's model", () => {
  const runDir = path.join(scratch, "demo-sft");
  const args = (steps: number) => [
    "sft", "--config", path.join(REPO_ROOT, "examples", "cpu-demo-sft.yaml"), "--json",
    "--set", `trainer.default_local_dir=${runDir}`,
    "--set", `data.val_files=${path.join(scratch, "demo-val.jsonl")}`,
    "--set", "trainer.test_freq=4",
    "--set", "trainer.save_freq=4",
    "--steps", String(steps),
  ];

  it("lowers the loss, validates, writes a model folder, and resumes from its checkpoint", async () => {
    const demos = readFileSync(path.join(REPO_ROOT, "examples", "cpu-demo", "data", "sft.jsonl"), "utf8").trim().split("\n");
    writeFileSync(path.join(scratch, "demo-val.jsonl"), demos.slice(0, 8).join("\n") + "\n");
    const first = await runCli(args(8), { timeoutMs: 180_000 });
    expect(first.code, first.stderr).toBe(0);
    const events = first.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, number | string>);
    const steps = events.filter((e) => e.event === "step");
    expect(steps.map((s) => s.step)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(Number(steps.at(-1)!["sft/loss"])).toBeLessThan(0.6 * Number(steps[0]!["sft/loss"]));
    const validations = events.filter((e) => e.event === "validation");
    expect(validations.map((v) => v.step)).toEqual([4, 8]);
    expect(Number(validations[1]!["val/loss"])).toBeLessThan(Number(validations[0]!["val/loss"]));
    expect(events.at(-1)).toMatchObject({ event: "done", steps: 8 });
    for (const file of ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]) {
      expect(existsSync(path.join(runDir, "model", file)), file).toBe(true);
    }

    // Every checkpoint stays by default; with trainer.max_ckpt_to_keep (verl's key) only the newest ones do.
    const checkpoints = () => readdirSync(path.join(runDir, "checkpoints")).sort();
    expect(checkpoints()).toEqual(["step-000004", "step-000008"]);
    const resumed = await runCli([...args(10), "--resume", "--set", "trainer.max_ckpt_to_keep=2"], { timeoutMs: 180_000 });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain("resumed from checkpoints/step-000008 (step 8");
    expect(checkpoints()).toEqual(["step-000008", "step-000010"]);
    const logged = readFileSync(path.join(runDir, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => (JSON.parse(l) as { step: number }).step);
    expect(logged).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  }, 400_000);
});
