/**
 * LoRA end to end (issue 30) on the CPU demo's mechanics (random-init model, 4 prompts × 8, no validation): verl's
 * actor_rollout_ref.model.lora_rank trains a peft adapter in the worker; each step's sync writes the adapter alone
 * (runs/<name>/lora/<version>) and loads it into the embedded engine under the step as its name, and every request
 * names it in lora_path. Checked:
 * - the engine's log-probs with the adapter are the trainer's (mismatch KL ~0 every step) and each sampled token's
 *   version names the adapter that sampled it (the previous step's);
 * - a run stopped after step 2 and resumed with --resume trains step 3 exactly as the uninterrupted run does (same
 *   trajectories, same loss, KL and gradient norm);
 * - `agentrl export` writes the merged model, byte for byte what `python -m agentrl_worker.export_lora` makes of the
 *   adapter the engine served, and with --adapter that adapter itself.
 * The worker's side (gradients, merged export, checkpoints) is worker/tests/test_lora.py; the engine's, each sync path
 * bit for bit, worker/tests/test_embedded_lora.py.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { runPython, torchPythonEnv } from "./helpers/python.js";
import { demoTwoSteps, readMetrics, readStep } from "./helpers/train.js";
import { tempDir } from "./helpers/tmp.js";

const RUN_TIMEOUT_MS = 300_000;
const scratch = tempDir("train-lora");
const LORA = { "actor_rollout_ref.model.lora_rank": 8, "actor_rollout_ref.model.lora_alpha": 16, "trainer.save_freq": 1 };

const run = (dir: string, steps: number, extra: Record<string, string | number> = {}, flags: string[] = []) =>
  runCli([...demoTwoSteps(dir, ["--json", ...flags], { ...LORA, "trainer.total_training_steps": steps, ...extra })], { timeoutMs: RUN_TIMEOUT_MS });

describe("examples/cpu-demo-lora.yaml", () => {
  it("is a valid config whose dry run says what trains and what each sync sends", async () => {
    const { code, stdout, stderr } = await runCli(["train", "--config", "examples/cpu-demo-lora.yaml", "--dry-run", "--json"]);
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout).implied.lora).toMatch(/^rank 16, alpha 32 on every linear layer.*the adapter alone/);
  });
});

describe("agentrl train with a LoRA adapter", () => {
  const straight = path.join(scratch, "straight");
  let code: number | null;
  let stderr: string;

  beforeAll(async () => {
    ({ code, stderr } = await run(straight, 3));
  }, RUN_TIMEOUT_MS);

  it("samples with the adapter at the trainer's log-probs, each token's version naming the adapter", async () => {
    expect(code, stderr).toBe(0);
    const metrics = readMetrics(straight);
    expect(metrics.map((m) => m.weight_version)).toEqual([1, 2, 3]);
    for (const m of metrics) expect(Math.abs(m["mismatch/kl"]!)).toBeLessThan(1e-6);
    for (const step of [2, 3]) {
      for (const t of await readStep(straight, step)) {
        expect(t.weight_version).toBe(String(step - 1));
        expect(t.version_spans.every((s) => s.weight_version === String(step - 1))).toBe(true);
      }
    }
    // the adapter the engine serves: a PEFT folder of rank 8; the one before it is gone
    const adapter = JSON.parse(readFileSync(path.join(straight, "lora", "3", "adapter_config.json"), "utf8"));
    expect(adapter.r).toBe(8);
    expect(existsSync(path.join(straight, "lora", "2"))).toBe(false);
  });

  it("agentrl export writes the merged model of the served adapter, or with --adapter the adapter itself", async () => {
    expect(code, stderr).toBe(0);
    const merged = path.join(scratch, "export-merged");
    const exported = await runCli(["export", straight, "--out", merged, "--json"], { timeoutMs: RUN_TIMEOUT_MS });
    expect(exported.code, exported.stderr).toBe(0);
    expect(JSON.parse(exported.stdout)).toMatchObject({ event: "done", step: 3, kind: "model", lora: true, out: merged });
    // The same merge as the documented module's, of the adapter the engine served after step 3: byte for byte.
    const byModule = path.join(scratch, "export-module");
    const module = runPython(
      ["-m", "agentrl_worker.export_lora", "--adapter", path.join(straight, "lora", "3"), "--base", path.join(REPO_ROOT, "examples", "cpu-demo", "model"), "--out", byModule],
      { cwd: path.join(REPO_ROOT, "worker"), env: torchPythonEnv() },
    );
    expect(module.code, module.stderr).toBe(0);
    const weights = (dir: string) => readFileSync(path.join(dir, "model.safetensors"));
    expect(weights(merged).equals(weights(byModule))).toBe(true);
    expect(readFileSync(path.join(merged, "config.json"), "utf8")).toBe(readFileSync(path.join(byModule, "config.json"), "utf8"));

    const adapter = path.join(scratch, "export-adapter");
    const alone = await runCli(["export", straight, "--out", adapter, "--adapter", "--quiet"], { timeoutMs: RUN_TIMEOUT_MS });
    expect(alone.code, alone.stderr).toBe(0);
    expect(alone.stdout).toMatch(/step 3's LoRA adapter \(PEFT folder\) in /);
    const tensors = (dir: string) => readFileSync(path.join(dir, "adapter_model.safetensors"));
    expect(tensors(adapter).equals(tensors(path.join(straight, "lora", "3")))).toBe(true);
  }, 2 * RUN_TIMEOUT_MS);

  it("stopped after step 2 and resumed, trains step 3 bit for bit as the uninterrupted run", async () => {
    const resumed = path.join(scratch, "resumed");
    const first = await run(resumed, 2);
    expect(first.code, first.stderr).toBe(0);
    const again = await run(resumed, 3, {}, ["--resume"]);
    expect(again.code, again.stderr).toBe(0);
    const want = readMetrics(straight).at(-1)!;
    const got = readMetrics(resumed).at(-1)!;
    expect(got.step).toBe(3);
    for (const key of ["actor/pg_loss", "actor/grad_norm", "actor/kl_loss", "critic/rewards/mean"]) {
      expect(got[key], key).toBe(want[key]);
    }
    const ids = (ts: Awaited<ReturnType<typeof readStep>>) => ts.map((t) => `${t.data_index}/${t.sample_index}:${t.response_ids.join(",")}`).sort();
    expect(ids(await readStep(resumed, 3))).toEqual(ids(await readStep(straight, 3)));
  }, 2 * RUN_TIMEOUT_MS);
});
