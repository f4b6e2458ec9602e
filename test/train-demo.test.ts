/**
 * The CPU demo end to end (issue 7; docs/cpu-demo.md), shortened: the built CLI warm-starts the demo model with a
 * short `agentrl sft` on the committed demonstrations (so it calls the tool from the first step), then runs `agentrl
 * train` on the demo's task (embedded engine, training worker, the vault task) with a fixed seed, then again killed
 * with SIGKILL between steps and resumed with --resume, and again stopped with Ctrl-C and resumed. It checks what a
 * user of the loop relies on:
 * - trajectories hold executed tool calls (parsed from the template's own qwen25 format, run, response appended);
 * - the weight version advances every step;
 * - at step 1 the importance ratio is exactly 1 and the KL to the reference is 0;
 * - metrics.jsonl has one complete line per step;
 * - the killed and resumed run uses the same prompts, step by step, as the uninterrupted one.
 * Also: the demo's tokenizer loads in the chat layer (end-of-turn token, bridge), a clean call conversation passes the
 * drift check, and the committed tokenizer is what agentrl_worker.synthetic_tokenizer writes. That the demo learns
 * its task is test/demo-learns.test.ts.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { CLI, REPO_ROOT, runCli } from "./helpers/cli.js";
import { runPython } from "./helpers/python.js";
import { Conversation, loadChatModel } from "../src/chat/index.js";
import { getParser } from "../src/parsers/index.js";
import { readPrompts, sampleOf } from "../src/rollout/sample.js";
import { scoreVault } from "../src/rewards/index.js";
import { loadToolRegistry, runToolCall } from "../src/tools/index.js";
import type { Trajectory } from "../src/data/trajectory.js";
import { DEMO_CONFIG, dataOrder, readMetrics, readStep, stateStep, type Metrics } from "./helpers/train.js";
import { tempDir } from "./helpers/tmp.js";

const CONFIG = DEMO_CONFIG;
const MODEL = path.join(REPO_ROOT, "examples", "cpu-demo", "model");
/** The uninterrupted run, and the resume checks: killed after KILL_AFTER_STEP, then resumed to the end. */
const STEPS = 5;
const RESUME_STEPS = STEPS;
const KILL_AFTER_STEP = 3;
/** SFT steps of the warm start: enough for a clean call on every prompt, far short of the task. */
const SFT_STEPS = 60;
const RUN_TIMEOUT_MS = 420_000;
const scratch = tempDir("train-demo");

const warmStart = path.join(scratch, "sft");

/**
 * The demo config (4 prompts × 8 a step), shortened: from the warm start, a checkpoint every step, no validation, and
 * the shaped vault reward, whose tool step reward the tool-call checks read.
 */
function trainArgs(runDir: string, steps = STEPS): string[] {
  return [
    "train", "--config", CONFIG, "--json",
    "--set", `actor_rollout_ref.model.path=${path.join(warmStart, "model")}`,
    "--set", "custom_reward_function.reward_kwargs.shaped=true",
    "--set", `trainer.default_local_dir=${runDir}`,
    "--set", `trainer.total_training_steps=${steps}`,
    "--set", "trainer.save_freq=1",
    "--set", "trainer.test_freq=-1",
    "--set", "actor_rollout_ref.actor.optim.lr=5.0e-4",
  ];
}

/** Starts `agentrl train` and SIGKILLs it once the checkpoint of `step` is recorded, i.e. between two steps. */
function trainKilledAfter(runDir: string, step: number): Promise<{ killed: boolean; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...trainArgs(runDir, RESUME_STEPS)], {
      cwd: REPO_ROOT,
      env: { ...process.env, NO_COLOR: "1" },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    let killed = false;
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const poll = setInterval(() => {
      if (stateStep(runDir) >= step && !killed) {
        killed = true;
        child.kill("SIGKILL");
      }
    }, 50);
    const timer = setTimeout(() => child.kill("SIGKILL"), RUN_TIMEOUT_MS);
    child.on("error", reject);
    child.on("close", () => {
      clearInterval(poll);
      clearTimeout(timer);
      resolve({ killed, stderr });
    });
  });
}

const CALL_BODY = '\n{"name": "open_vault", "arguments": {}}\n';
const CALL = `<tool_call>${CALL_BODY}</tool_call>`;

describe("the vault task", () => {
  it("preprocess vault writes verl rows whose code is only in the ground truth and the tool's kwargs", async () => {
    const out = path.join(scratch, "vault");
    const made = await runCli(["preprocess", "vault", "--out", out, "--train-rows", "50", "--test-rows", "5", "--seed", "7", "--json"]);
    expect(made.code, made.stderr).toBe(0);
    expect(JSON.parse(made.stdout).splits.map((s: { rows: number }) => s.rows)).toEqual([50, 5]);
    const codes = new Set<string>();
    for await (const prompt of readPrompts(path.join(out, "train.parquet"))) {
      const sample = sampleOf(prompt, 0);
      expect(sample.dataSource).toBe("agentrl/vault");
      expect(sample.groundTruth).toMatch(/^[0-9]$/);
      expect(sample.toolsKwargs).toEqual({ open_vault: { create_kwargs: { code: sample.groundTruth } } });
      expect(JSON.stringify(sample.messages)).not.toMatch(/[0-9]/);
      codes.add(sample.groundTruth);
    }
    expect(codes.size).toBeGreaterThan(5);
    const again = await runCli(["preprocess", "vault", "--out", out, "--train-rows", "50", "--test-rows", "5", "--seed", "7"]);
    expect(again.code).not.toBe(0); // refuses to overwrite without --force
    const copy = path.join(scratch, "vault-copy");
    expect((await runCli(["preprocess", "vault", "--out", copy, "--train-rows", "50", "--test-rows", "5", "--seed", "7"])).code).toBe(0);
    expect(readFileSync(path.join(copy, "train.parquet")).equals(readFileSync(path.join(out, "train.parquet")))).toBe(true);
  });

  it("--demo-accuracy must be a probability: exit 2 naming the flag, nothing written", async () => {
    const out = path.join(scratch, "vault-bad-accuracy");
    const bad = await runCli(["preprocess", "vault", "--out", out, "--demos", "4", "--demo-accuracy", "1.5"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--demo-accuracy must be a number in [0, 1], got '1.5'");
    expect(existsSync(out)).toBe(false);
  });

  it("open_vault answers the row's code with step reward 1", async () => {
    const tools = await loadToolRegistry(path.join(REPO_ROOT, "examples", "cpu-demo", "vault_tool_config.yaml"));
    const outcome = await runToolCall(tools, { name: "open_vault", arguments: {} }, { open_vault: { create_kwargs: { code: "4" } } });
    expect(outcome).toMatchObject({ text: "4", reward: 1 });
    await tools.close();
  });

  it("shaped (reward_kwargs.shaped): scores a run call and the right answer, with format credit only while no call ran", () => {
    const shaped = { shaped: true };
    const answered = (call: string, code: string) => `${call}\nuser\n<tool_response>\n4\n</tool_response>\nassistant\n${code}`;
    expect(scoreVault(answered(CALL, "4"), "4", [1], shaped).score).toBe(1);
    expect(scoreVault(answered(CALL, "5"), "4", [1], shaped).score).toBe(0.5);
    // The parser accepts `<tool_call>` body `<tool_call>`; the call ran, but amid junk it pays 0.2 + format credit.
    expect(scoreVault(answered(`<tool_call>${CALL_BODY}<tool_call>`, "4"), "4", [1], shaped).score).toBeCloseTo(0.2 + 0.16 * (1 - 3 / 32) + 0.5);
    // Format credit: 0.04 per piece present + 0.04 per token of the ordered run, times (1 - tokens / 32).
    expect(scoreVault(CALL, "4", [], shaped).score).toBeCloseTo(0.24 * (1 - 3 / 32)); // well-formed but never run (cut turn)
    expect(scoreVault(`x<tool_call>${CALL_BODY}y`, "4", [], shaped).score).toBeCloseTo(0.16 * (1 - 4 / 32));
    expect(scoreVault("</tool_call>a<tool_call>", "4", [], shaped).score).toBeCloseTo(0.12 * (1 - 3 / 32));
    expect(scoreVault(`${CALL}${"x".repeat(40)}`, "4", [], shaped).score).toBe(0); // a turn that never ends earns nothing
    expect(scoreVault("hello", "4", [], shaped).score).toBe(0);
    expect(scoreVault("4", "4", [], shaped).score).toBe(0.5); // a lucky guess without the tool
    // A faked tool response earns nothing for the call: only the tool's step reward proves a call ran.
    expect(scoreVault("<tool_response>\n4\n</tool_response>\nassistant\n3", "4", [], shaped).score).toBe(0);
  });
});

describe("the CPU demo's tokenizer and template", () => {
  it("is what synthetic_tokenizer writes, byte for byte", () => {
    const out = path.join(scratch, "tokenizer");
    const made = runPython(["-m", "agentrl_worker.synthetic_tokenizer", "--out", out], { cwd: path.join(REPO_ROOT, "worker") });
    expect(made.code, made.stderr).toBe(0);
    for (const file of ["tokenizer.json", "tokenizer_config.json"]) {
      expect(readFileSync(path.join(out, file), "utf8"), file).toBe(readFileSync(path.join(MODEL, file), "utf8"));
    }
  });

  it("loads in the chat layer: 64 tokens, <|im_end|> ends a turn, a newline bridges to the next", async () => {
    const model = await loadChatModel(MODEL);
    expect(model.vocabSize).toBe(64);
    expect(model.endOfTurnToken).toBe("<|im_end|>");
    expect(model.bridgeText).toBe("\n");
    for (const token of ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<|im_start|>", "<|im_end|>"]) {
      const id = model.tokenToId(token);
      expect(id, token).toBeDefined();
      expect(model.isSpecialId(id!), token).toBe(true);
    }
    // The whole no-argument call body is one token, so a random policy can hit a call.
    expect(model.encode('<tool_call>\n{"name": "open_vault", "arguments": {}}\n</tool_call>')).toHaveLength(3);
  });

  it("passes the drift check on a clean call, its tool response and the answer", async () => {
    const model = await loadChatModel(MODEL);
    const tools = await loadToolRegistry(path.join(REPO_ROOT, "examples", "cpu-demo", "vault_tool_config.yaml"));
    const conversation = Conversation.start(model, [{ role: "user", content: "what is the code of vault ym?" }], { tools: tools.schemas() });
    conversation.appendSampled([...model.encode(CALL), model.endOfTurnTokenId]);
    const parsed = getParser("qwen25").parseTokens(conversation.lastAssistantIds(), model, { tools: ["open_vault"] });
    expect(parsed.errors).toEqual([]);
    expect(parsed.calls.map((c) => [c.name, c.arguments])).toEqual([["open_vault", {}]]);
    conversation.recordToolCalls(parsed.calls.map((c) => ({ type: "function", function: { name: c.name, arguments: c.arguments } })), parsed.normalText);
    conversation.appendEnvironment([{ role: "tool", content: "7" }]);
    conversation.appendSampled([...model.encode("7"), model.endOfTurnTokenId]);
    expect(conversation.driftCheck("strict").status).toBe("match");
    expect(conversation.responseLength).toBe(4 + 14 + 2); // call, tool turn (bridge + user turn + generation prompt), answer
    await tools.close();
  });
});

describe("agentrl train on the CPU demo", () => {
  const straight = path.join(scratch, "straight");
  const resumed = path.join(scratch, "resumed");
  let straightRun: Awaited<ReturnType<typeof runCli>>;
  let metrics: Metrics[];
  let trajectories: Trajectory[] = [];

  beforeAll(async () => {
    const sft = await runCli(
      ["sft", "--config", path.join(REPO_ROOT, "examples", "cpu-demo-sft.yaml"), "--quiet", "--steps", String(SFT_STEPS), "--set", `trainer.default_local_dir=${warmStart}`],
      { timeoutMs: RUN_TIMEOUT_MS },
    );
    expect(sft.code, sft.stderr).toBe(0);
    straightRun = await runCli(trainArgs(straight), { timeoutMs: RUN_TIMEOUT_MS });
    if (straightRun.code === 0) {
      metrics = readMetrics(straight);
      for (let step = 1; step <= STEPS; step++) trajectories.push(...(await readStep(straight, step)));
    }
  }, 2 * RUN_TIMEOUT_MS);

  it("finishes every step", () => {
    expect(straightRun.code, straightRun.stderr).toBe(0);
    const steps = straightRun.stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l)).filter((e) => e.event === "step");
    expect(steps.map((e) => e.step)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
  });

  it("writes one complete metrics line per step", () => {
    expect(metrics.map((m) => m.step)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    for (const m of metrics) {
      for (const key of [
        "critic/rewards/mean", "actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "actor/ratio_max", "actor/ratio_min",
        "tool/calls_per_traj", "drift/count", "weight_version", "timing_s/gen", "timing_s/update_actor", "timing_s/step",
      ]) {
        expect(Number.isFinite(m[key]), `step ${m.step}: ${key}`).toBe(true);
      }
    }
  });

  it("advances the weight version every step, and samples each step from the previous step's weights", () => {
    expect(metrics.map((m) => m.weight_version)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    for (const t of trajectories.filter((t) => t.step! > 1)) expect(t.weight_version).toBe(String(t.step! - 1));
  });

  it("has importance ratio 1 and KL 0 at step 1 (the policy is still the reference and the sampler)", () => {
    const first = metrics[0]!;
    expect(Math.abs(first["actor/ratio_max"]! - 1)).toBeLessThan(1e-6);
    expect(Math.abs(first["actor/ratio_min"]! - 1)).toBeLessThan(1e-6);
    expect(Math.abs(first["actor/kl_loss"]!)).toBeLessThan(1e-6);
    expect(metrics.at(-1)!["actor/kl_loss"]).toBeGreaterThan(0); // and it does move away afterwards
  });

  it("executes tool calls: parsed, run, and their response appended to the conversation", () => {
    const called = trajectories.filter((t) => t.calls.some((c) => c.error_kind === null));
    expect(called.length).toBeGreaterThan(trajectories.length / 2); // the warm start calls on (nearly) every prompt
    for (const t of called) {
      const call = t.calls.find((c) => c.error_kind === null)!;
      expect(call.name).toBe("open_vault");
      expect(call.response).toBe(t.ground_truth); // the vault's code, read from the row's tools_kwargs
      expect(t.tool_rewards).toEqual([1]);
      expect(t.reward).toBeGreaterThanOrEqual(0.2);
    }
    // Each response is appended (mask 0, then the model answers), unless the turn's observations, parse errors of
    // the junk around the call included, did not fit in the response budget: then the trajectory says so.
    for (const t of called) {
      const tool = t.segments.findIndex((s) => s.kind === "tool");
      if (tool < 0) {
        expect(t.finish_reason).toBe("response_budget");
        continue;
      }
      expect(t.segments[tool]!.text).toContain(`<tool_response>\n${t.ground_truth}\n</tool_response>`);
      expect(t.response_mask.slice(t.segments[tool]!.start, t.segments[tool]!.end).every((m) => m === 0)).toBe(true);
      expect(t.segments[tool + 1]?.kind).toBe("assistant");
    }
  });

  it("after SIGKILL between steps, --resume uses the same prompts step by step as the uninterrupted run", async () => {
    const killed = await trainKilledAfter(resumed, KILL_AFTER_STEP);
    expect(killed.killed, killed.stderr).toBe(true);
    expect(stateStep(resumed)).toBe(KILL_AFTER_STEP);
    const again = await runCli([...trainArgs(resumed, RESUME_STEPS), "--resume"], { timeoutMs: RUN_TIMEOUT_MS });
    expect(again.code, again.stderr).toBe(0);
    expect(readMetrics(resumed).map((m) => m.step)).toEqual(Array.from({ length: RESUME_STEPS }, (_, i) => i + 1));
    expect(existsSync(path.join(resumed, "rollouts", `step-${String(RESUME_STEPS).padStart(6, "0")}.parquet`))).toBe(true);
    const order = await dataOrder(resumed, RESUME_STEPS);
    expect(order.every((step) => step.length === 4 * 8)).toBe(true);
    expect(order).toEqual(await dataOrder(straight, RESUME_STEPS));
  }, 2 * RUN_TIMEOUT_MS);

  it("Ctrl-C (SIGINT) checkpoints the last finished step and exits 130; --resume finishes the run with each step once", async () => {
    const interrupted = path.join(scratch, "interrupted");
    // No periodic checkpoints: the one on disk after SIGINT is the one the interrupt wrote.
    const args = [...trainArgs(interrupted, RESUME_STEPS), "--set", "trainer.save_freq=-1"];
    const child = spawn(process.execPath, [CLI, ...args], { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
    // Listening from the start: a run that exits on its own before step 2 must fail the test, not hang it.
    const closed = new Promise((resolve) => child.on("close", resolve));
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const deadline = Date.now() + RUN_TIMEOUT_MS;
    while (!stdout.includes('"event":"step","step":2') && Date.now() < deadline && child.exitCode === null) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    child.kill("SIGINT");
    const code = await closed;
    expect(code, stderr).toBe(130);
    expect(stderr).toContain("--resume");
    const stopped = stateStep(interrupted);
    expect(stopped).toBeGreaterThanOrEqual(2);
    expect(stopped).toBeLessThan(RESUME_STEPS);
    const again = await runCli([...args, "--resume"], { timeoutMs: RUN_TIMEOUT_MS });
    expect(again.code, again.stderr).toBe(0);
    expect(readMetrics(interrupted).map((m) => m.step)).toEqual(Array.from({ length: RESUME_STEPS }, (_, i) => i + 1));
    expect(await dataOrder(interrupted, RESUME_STEPS)).toEqual(await dataOrder(straight, RESUME_STEPS));
  }, 2 * RUN_TIMEOUT_MS);
});
