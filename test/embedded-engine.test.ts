/**
 * The embedded engine behind SGLang's API, with a real (tiny, random-init) model and the real Qwen3 tokenizer:
 * - the same protocol suite the fake server passes;
 * - `agentrl rollout --engine embedded` completes a GSM8K rollout of 32 trajectories with n=4;
 * - the logprobs the engine reported equal the training worker's compute_log_probs for the same weights;
 * - weights saved by the worker and loaded with /update_weights_from_disk change the outputs and the weight version.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import path from "node:path";
import { request } from "undici";
import { REPO_ROOT, SHARED, runCli } from "./helpers/cli.js";
import { tinyQwenModel } from "./helpers/tiny-model.js";
import { describeSglangProtocol } from "./protocol/sglang-protocol.js";
import { startInferenceServer } from "../src/serve/index.js";
import { WorkerClient, readSafetensors, writeBatch } from "../src/train/worker/index.js";
import { readTrajectories } from "../src/data/trajectory-store.js";
import type { Trajectory } from "../src/data/trajectory.js";
import { tempDir as tmp } from "./helpers/tmp.js";

const model = tinyQwenModel();

describeSglangProtocol("embedded engine", async () => {
  const engine = await startInferenceServer({ engine: "embedded", model, port: 0 });
  return { url: engine.url, close: async () => void (await engine.stop()) };
});

async function generate(url: string, inputIds: number[]) {
  const res = await request(`${url}/generate`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ input_ids: inputIds, sampling_params: { max_new_tokens: 8, temperature: 0 }, return_logprob: true }),
  });
  return (await res.body.json()) as { output_ids: number[]; meta_info: { weight_version: string } };
}

describe("rollout on the embedded engine, checked against the training worker", () => {
  const data = tmp("emb-data");
  const out = path.join(tmp("emb-out"), "t.parquet");
  let trajectories: Trajectory[] = [];
  let worker: WorkerClient | undefined;

  beforeAll(async () => {
    expect((await runCli(["preprocess", "gsm8k", "-i", path.join(SHARED, "datasets/gsm8k"), "-o", data, "--split", "test", "--limit", "8"])).code).toBe(0);
    const result = await runCli(
      [
        "rollout", "--engine", "embedded", "--data", path.join(data, "test.parquet"), "--model", model, "--n", "4",
        "--tools", path.join(REPO_ROOT, "tool-configs/gsm8k_tool_config.yaml"), "--out", out, "--json", "--seed", "3",
        "--set", "data.max_response_length=12",
      ],
      { timeoutMs: 240_000 },
    );
    expect(result.code, result.stderr).toBe(0);
    for await (const t of readTrajectories(out)) trajectories.push(t);
    worker = await WorkerClient.start({ nprocPerNode: 1 });
    await worker.init({ model_path: model, seed: 0, temperature: 1.0, lr: 0.05 });
  }, 300_000);
  afterAll(async () => worker?.shutdown());

  it("completes 32 trajectories with n=4", () => {
    expect(trajectories).toHaveLength(32);
    expect(new Set(trajectories.map((t) => t.group_id)).size).toBe(8);
    for (const t of trajectories) {
      expect(["completed", "truncated"]).toContain(t.status);
      expect(t.response_mask.filter((m) => m === 1).length).toBeGreaterThan(0);
    }
  });

  it("reports the logprobs the worker computes for the same weights (max |diff| < 1e-3 in fp32)", async () => {
    const dir = tmp("emb-lp");
    const rows = trajectories.map((t, i) => ({
      ids: [...t.prompt_ids, ...t.response_ids],
      responseMask: [...new Array<number>(t.prompt_ids.length).fill(0), ...t.response_mask],
      reward: t.reward,
      groupId: Number(t.group_id),
      rolloutLogProbs: [...new Array<number>(t.prompt_ids.length).fill(0), ...t.response_logprobs],
      _i: i,
    }));
    await writeBatch(path.join(dir, "batch.safetensors"), rows, 151643);
    const result = await worker!.computeLogProbs(path.join(dir, "batch.safetensors"), path.join(dir, "lp.safetensors"));
    const old = (await readSafetensors(result.path)).old_log_probs!;
    const width = old.shape[1]!;
    let maxDiff = 0;
    let compared = 0;
    trajectories.forEach((t, row) => {
      t.response_mask.forEach((m, j) => {
        if (m !== 1) return;
        const trainer = (old.data as Float32Array)[row * width + t.prompt_ids.length + j]!;
        maxDiff = Math.max(maxDiff, Math.abs(trainer - t.response_logprobs[j]!));
        compared += 1;
      });
    });
    console.log(`engine vs worker logprobs: max |diff| = ${maxDiff.toExponential(2)} over ${compared} sampled tokens`);
    expect(compared).toBeGreaterThan(100);
    expect(maxDiff).toBeLessThan(1e-3);
  });

  it("weights saved by the worker and loaded with /update_weights_from_disk change outputs and the weight version", async () => {
    const engine = await startInferenceServer({ engine: "embedded", model, port: 0 });
    try {
      const prompt = trajectories[0]!.prompt_ids;
      const before = await generate(engine.url, prompt);
      // One big update on a fixed batch moves the tiny model's weights far enough to change greedy outputs.
      const dir = tmp("emb-upd");
      const rows = trajectories.slice(0, 8).map((t, i) => ({
        ids: [...t.prompt_ids, ...t.response_ids],
        responseMask: [...new Array<number>(t.prompt_ids.length).fill(0), ...t.response_mask],
        reward: i % 2,
        groupId: Math.floor(i / 4),
      }));
      await writeBatch(path.join(dir, "b.safetensors"), rows, 151643);
      const lp = await worker!.computeLogProbs(path.join(dir, "b.safetensors"), path.join(dir, "lp.safetensors"));
      await worker!.update(path.join(dir, "b.safetensors"), lp.path);
      await worker!.saveWeights(path.join(dir, "weights"));
      const res = await request(`${engine.url}/update_weights_from_disk`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model_path: path.join(dir, "weights") }),
      });
      const body = (await res.body.json()) as { success: boolean };
      expect(body.success).toBe(true);
      const after = await generate(engine.url, prompt);
      expect(after.meta_info.weight_version).not.toBe(before.meta_info.weight_version);
      expect(after.output_ids).not.toEqual(before.output_ids);
    } finally {
      await engine.stop();
    }
  }, 120_000);
});
