/**
 * The CPU demo end to end (issue 7; docs/cpu-demo.md), shortened: the built CLI warm-starts the demo model with a
 * short `agentrl sft` on the committed demonstrations (so it calls the tool from the first step), then runs `agentrl
 * train` on the demo's task (embedded engine, training worker, the vault task) with a fixed seed, then runs it again
 * as a user would (its own folder, --set, --steps, --name: runs/<name>), killed with SIGKILL between steps, resumed with
 * --resume and stopped with Ctrl-C, then resumed by running the printed hint verbatim. It checks what a user of the
 * loop relies on:
 * - trajectories hold executed tool calls (parsed from the template's own qwen25 format, run, response appended);
 * - the weight version advances every step;
 * - at step 1 the importance ratio is exactly 1 and the KL to the reference is 0;
 * - metrics.jsonl has one complete line per step;
 * - the killed, interrupted and resumed run uses the same prompts, step by step, as the uninterrupted one, and logs
 *   each step once;
 * - the Ctrl-C resume hint of `agentrl train` works as printed (issue 15, item 6; the hint of `agentrl sft` and the
 *   hint's unit tests are test/resume-hint.test.ts): it names the run folder's own config.yaml, which holds every
 *   --set, --steps and --name of the run.
 * Also: the demo's tokenizer loads in the chat layer (end-of-turn token, bridge), a clean call conversation passes the
 * drift check, and the committed tokenizer is what agentrl_worker.synthetic_tokenizer writes. That the demo learns
 * its task is test/demo-learns.test.ts.
 */
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { dump as dumpYaml, load as loadYaml } from "js-yaml";
import { beforeAll, describe, expect, it } from "vitest";
import { CLI, REPO_ROOT, runCli } from "./helpers/cli.js";
import { runPython } from "./helpers/python.js";
import { Conversation, loadChatModel } from "../src/chat/index.js";
import { getParser } from "../src/parsers/index.js";
import { readPrompts, sampleOf } from "../src/rollout/sample.js";
import { scoreVault } from "../src/rewards/index.js";
import { loadToolRegistry, runToolCall } from "../src/tools/index.js";
import { shellQuote } from "../src/train/resume-hint.js";
import type { Trajectory } from "../src/data/trajectory.js";
import { DEMO_CONFIG, dataOrder, pad6, readMetrics, readStep, seededMetrics, stateStep, type Metrics } from "./helpers/train.js";
import { tempDir } from "./helpers/tmp.js";

const CONFIG = DEMO_CONFIG;
const MODEL = path.join(REPO_ROOT, "examples", "cpu-demo", "model");
/**
 * The uninterrupted run's steps, and the interrupted run's: killed after KILL_AFTER_STEP, resumed and stopped with
 * Ctrl-C once its first step (KILL_AFTER_STEP + 1) is printed, then resumed to the end. Ctrl-C lets the step in flight
 * finish: the steps after it leave room for that one and one more, should the signal come late.
 */
const STEPS = 5;
const KILL_AFTER_STEP = 1;
/** SFT steps of the warm start: enough for a clean call on every prompt, far short of the task. */
const SFT_STEPS = 60;
const RUN_TIMEOUT_MS = 420_000;
const scratch = tempDir("train-demo");

const warmStart = path.join(scratch, "sft");

/**
 * The demo config (4 prompts × 8 a step), shortened: from the warm start, no validation, and the shaped vault reward,
 * whose tool step reward the tool-call checks read. `saveFreq`: a checkpoint every N steps (-1: at the end only).
 */
function trainSets(saveFreq: number): string[] {
  return [
    "--set", `actor_rollout_ref.model.path=${path.join(warmStart, "model")}`,
    "--set", "custom_reward_function.reward_kwargs.shaped=true",
    "--set", `trainer.save_freq=${saveFreq}`,
    "--set", "trainer.test_freq=-1",
    "--set", "actor_rollout_ref.actor.optim.lr=5.0e-4",
  ];
}

/** `agentrl` (the built CLI) started in `cwd`, its output collected; `command` may be another program (a shell). */
function start(cwd: string, args: string[], command: string = process.execPath, env: NodeJS.ProcessEnv = {}) {
  const child = spawn(command, command === process.execPath ? [CLI, ...args] : args, {
    cwd,
    env: { ...process.env, NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  // Listening from the start: a run that exits on its own before the test stops it must fail the test, not hang it.
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => resolve(code));
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), RUN_TIMEOUT_MS);
  void exited.finally(() => clearTimeout(timer));
  return { child, exited, stdout: () => stdout, stderr: () => stderr, running: () => child.exitCode === null && child.signalCode === null };
}

/** Polls `condition` every 50 ms while `running` holds, up to the run's time limit; whether it came true. */
async function waitFor(condition: () => boolean, running: () => boolean): Promise<boolean> {
  const deadline = Date.now() + RUN_TIMEOUT_MS;
  while (!condition() && running() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  return condition();
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
  let straightRun: Awaited<ReturnType<typeof runCli>>;
  let metrics: Metrics[];
  let trajectories: Trajectory[] = [];

  beforeAll(async () => {
    const sft = await runCli(
      ["sft", "--config", path.join(REPO_ROOT, "examples", "cpu-demo-sft.yaml"), "--quiet", "--steps", String(SFT_STEPS), "--set", `trainer.default_local_dir=${warmStart}`],
      { timeoutMs: RUN_TIMEOUT_MS },
    );
    expect(sft.code, sft.stderr).toBe(0);
    // No checkpoint before the end: nothing here reads one (the interrupted run below needs its own).
    straightRun = await runCli(
      ["train", "--config", CONFIG, "--json", ...trainSets(-1), "--set", `trainer.default_local_dir=${straight}`, "--set", `trainer.total_training_steps=${STEPS}`],
      { timeoutMs: RUN_TIMEOUT_MS },
    );
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

  it("killed with SIGKILL between steps, resumed and stopped with Ctrl-C (exit 130, a checkpoint of the last finished step), then resumed by the printed hint verbatim: each step once, the same prompts step by step as the uninterrupted run", async () => {
    // As a user runs it: its own working folder, the run folder runs/<--name> in it, the demo's GRPO config with its
    // relative paths (relative to the repository) made absolute, and --set, --steps and --name on the command line.
    const cwd = path.join(scratch, "interrupted");
    mkdirSync(cwd);
    const tree = loadYaml(readFileSync(CONFIG, "utf8")) as TrainTree;
    const absolute = (p: string) => path.join(REPO_ROOT, p);
    tree.data.train_files = absolute(tree.data.train_files);
    tree.data.val_files = absolute(tree.data.val_files);
    tree.actor_rollout_ref.model.path = absolute(tree.actor_rollout_ref.model.path);
    tree.actor_rollout_ref.rollout.multi_turn.tool_config_path = absolute(tree.actor_rollout_ref.rollout.multi_turn.tool_config_path);
    const config = path.join(cwd, "grpo.yaml");
    writeFileSync(config, dumpYaml(tree));
    const runDir = path.join(cwd, "runs", "hint-run");
    // A checkpoint every step, so that the kill lands between two steps; the newest two kept (verl's key).
    const args = ["train", "--config", config, "--json", ...trainSets(1), "--set", "trainer.max_actor_ckpt_to_keep=2", "--steps", String(STEPS), "--name", "hint-run"];

    // 1. SIGKILL once the checkpoint of KILL_AFTER_STEP is recorded, i.e. between two steps.
    const killed = start(cwd, args);
    const reached = await waitFor(() => stateStep(runDir) >= KILL_AFTER_STEP, killed.running);
    killed.child.kill("SIGKILL");
    await killed.exited;
    expect(reached, killed.stderr()).toBe(true);
    expect(stateStep(runDir)).toBe(KILL_AFTER_STEP);

    // 2. --resume, and Ctrl-C (SIGINT) after its first step. No periodic checkpoints from here: the one on disk after
    //    SIGINT is the one the interrupt wrote.
    const interrupted = start(cwd, [...args, "--resume", "--set", "trainer.save_freq=-1"]);
    const stepped = await waitFor(() => interrupted.stdout().includes(`"event":"step","step":${KILL_AFTER_STEP + 1}`), interrupted.running);
    interrupted.child.kill("SIGINT");
    const code = await interrupted.exited;
    expect(stepped, interrupted.stderr()).toBe(true);
    expect(code, interrupted.stderr()).toBe(130);
    expect(interrupted.stderr()).toContain("--resume");
    const stopped = stateStep(runDir);
    expect(stopped).toBeGreaterThanOrEqual(KILL_AFTER_STEP + 1);
    expect(stopped).toBeLessThan(STEPS);
    const hint = /^resume with: (.+)$/m.exec(interrupted.stderr())?.[1];
    expect(hint, interrupted.stderr()).toBe(`agentrl train --config ${path.join("runs", "hint-run", "config.yaml")} --resume`);

    // 3. The printed hint, run verbatim by a shell with `agentrl` on PATH (as an installed CLI is): it resumes the same
    //    run (its --set, --steps and --name) and finishes it.
    const bin = path.join(cwd, "bin");
    mkdirSync(bin);
    writeFileSync(path.join(bin, "agentrl"), `#!/bin/sh\nexec ${shellQuote(process.execPath)} ${shellQuote(CLI)} "$@"\n`);
    chmodSync(path.join(bin, "agentrl"), 0o755);
    const resumed = start(cwd, ["-c", hint!], "sh", { PATH: `${bin}${path.delimiter}${process.env.PATH ?? ""}` });
    expect(await resumed.exited, resumed.stderr()).toBe(0);
    expect(resumed.stdout()).toContain(`resumed from checkpoints/step-${pad6(stopped)}`);
    expect(readMetrics(runDir).map((m) => m.step)).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    // The run went on from the checkpoint the stop wrote; the two newest are what is left.
    expect(readdirSync(path.join(runDir, "checkpoints")).sort()).toEqual([`step-${pad6(stopped)}`, `step-${pad6(STEPS)}`]);
    // The same seeds give the same run: killed, stopped and resumed, it logs what the uninterrupted run logged, line
    // for line, but for the clock (sync mode; docs/architecture.md says which modes repeat themselves). The one
    // exception is the engine's own log-probs against the trainer's (mismatch/kl): a restarted engine's prefix cache
    // starts empty, and a prefill from scratch rounds differently from one on cached keys and values.
    const [resumedLines, straightLines] = [seededMetrics(readMetrics(runDir)), seededMetrics(metrics)];
    const withoutEngineRounding = ({ "mismatch/kl": _kl, ...line }: Metrics) => line;
    expect(resumedLines.map(withoutEngineRounding)).toEqual(straightLines.map(withoutEngineRounding));
    resumedLines.forEach((line, i) => expect(line["mismatch/kl"]).toBeCloseTo(straightLines[i]!["mismatch/kl"]!, 6));
    expect(existsSync(path.join(runDir, "rollouts", `step-${pad6(STEPS)}.parquet`))).toBe(true);
    const order = await dataOrder(runDir, STEPS);
    expect(order.every((step) => step.length === 4 * 8)).toBe(true);
    expect(order).toEqual(await dataOrder(straight, STEPS));
    // The run's config.yaml kept the --set values, and no other run folder (the config's experiment_name) was made.
    const stored = loadYaml(readFileSync(path.join(runDir, "config.yaml"), "utf8")) as TrainTree;
    expect(stored.actor_rollout_ref.model.path).toBe(path.join(warmStart, "model"));
    expect(stored.actor_rollout_ref.actor.optim.lr).toBe(5.0e-4);
    expect(existsSync(path.join(cwd, "runs", tree.trainer.experiment_name))).toBe(false);
  }, 3 * RUN_TIMEOUT_MS);
});

/** The keys of the demo's train config that the test reads or rewrites. */
interface TrainTree {
  data: { train_files: string; val_files: string };
  actor_rollout_ref: { model: { path: string }; actor: { optim: { lr: number } }; rollout: { multi_turn: { tool_config_path: string } } };
  trainer: { experiment_name: string };
}
