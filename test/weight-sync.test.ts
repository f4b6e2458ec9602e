/**
 * Weight sync without disk (update_weights.method: distributed), end to end: a 2-rank torchrun worker (FSDP2, gloo)
 * and two embedded engines. The engines start from a different random model than the trainer, so only a sync that
 * moved every tensor makes them equal; they must then hold the trainer's weights bit for bit (/get_weights_by_name
 * against the trainer's own float32 save) and report the step as their weight version. A sync that dropped, reordered
 * or rounded a tensor would train on one policy while sampling another, with nothing failing.
 *
 * `agentrl train` with the key set syncs every step that way: no weights/ folder is ever written, and step 2's
 * trajectories were generated at version 1.
 *
 * And the fallback: a server without /init_weights_update_group (the fake SGLang server has none) gets a one-line
 * note and a disk sync, not an error and not a rendezvous that waits for its timeout.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SglangClient } from "../src/engine/index.js";
import { startInferenceServer, type EngineProcess } from "../src/serve/index.js";
import { WorkerClient, readSafetensors } from "../src/train/worker/index.js";
import { RunDir } from "../src/train/run-dir.js";
import type { TrainReporter } from "../src/train/reporter.js";
import { WeightSync, type WeightSyncSettings } from "../src/train/weight-sync.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { tinyQwenModel } from "./helpers/tiny-model.js";
import { runCli } from "./helpers/cli.js";
import { demoTwoSteps, readStep } from "./helpers/train.js";
import { tempDir } from "./helpers/tmp.js";

const DISTRIBUTED: WeightSyncSettings = { method: "distributed", master_address: null, master_port: 0, group_timeout: 120, bucketMegabytes: 1 };

function recordingReporter(notes: string[]): TrainReporter {
  return { phase: () => undefined, rolloutProgress: () => undefined, stepDone: () => undefined, validationDone: () => undefined, note: (m) => void notes.push(m) };
}

describe("distributed weight sync: 2 worker ranks, 2 embedded engines", () => {
  // The demo's 64-token vocabulary: every tensor is compared through /get_weights_by_name's JSON, and the claim is
  // about tensors, not the vocabulary's size.
  const served = tinyQwenModel({ seed: 0, tokenizer: "demo" });
  const trained = tinyQwenModel({ seed: 1, tokenizer: "demo" });
  let engines: EngineProcess[] = [];
  let worker: WorkerClient | undefined;
  let client: SglangClient | undefined;

  beforeAll(async () => {
    [engines, worker] = await Promise.all([
      Promise.all([0, 1].map(() => startInferenceServer({ engine: "embedded", model: served, port: 0 }))),
      WorkerClient.start({ nprocPerNode: 2 }),
    ]);
    await worker.init({ model_path: trained, seed: 0 });
    client = new SglangClient({ servers: engines.map((e) => e.url) });
  }, 300_000);
  afterAll(async () => {
    await worker?.shutdown();
    await client?.close();
    await Promise.all(engines.map((e) => e.stop()));
  });

  it("leaves every server with the trainer's weights, bit for bit, at the step's version", async () => {
    const notes: string[] = [];
    const runDir = new RunDir(tempDir("wsync-run"));
    const sync = new WeightSync(DISTRIBUTED, { worker: worker!, client: client!, runDir, colocate: false, reporter: recordingReporter(notes), partialRollout: false });
    expect(await sync.sync(1)).toBe("1");
    expect(notes).toEqual([]); // no fallback

    const saved = tempDir("wsync-saved");
    await worker!.saveWeights(saved, "float32");
    const expected = await readSafetensors(path.join(saved, "model.safetensors"));
    expect(Object.keys(expected).length).toBeGreaterThan(5);
    for (const engine of engines) {
      expect((await client!.modelInfo(engine.url)).weightVersion).toBe("1");
      for (const [name, tensor] of Object.entries(expected)) {
        const values = Float32Array.from((await client!.getWeightsByName(engine.url, name, 1 << 20)).flat(Infinity) as number[]);
        expect(values.length, name).toBe(tensor.data.length);
        expect(Buffer.from(values.buffer).equals(Buffer.from((tensor.data as Float32Array).buffer)), name).toBe(true);
      }
    }

    // The group stays formed: the next sync reuses it and only moves the version.
    expect(await sync.sync(2)).toBe("2");
    expect((await client!.modelInfo(engines[1]!.url)).weightVersion).toBe("2");
  }, 300_000);
});

describe("agentrl train with update_weights.method distributed", () => {
  it("syncs without disk every step: no fallback note, no weights/ folder, step 2 sampled at version 1", async () => {
    const runDir = path.join(tempDir("wsync-train"), "run");
    const sets = { "data.train_batch_size": 2, "actor_rollout_ref.rollout.n": 2, "actor_rollout_ref.rollout.update_weights.method": "distributed" };
    const result = await runCli(demoTwoSteps(runDir, ["--json"], sets), { timeoutMs: 240_000 });
    expect(result.code, result.stderr).toBe(0);
    const events = result.stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(events.filter((e) => e.event === "step").map((e) => e.weight_version)).toEqual([1, 2]);
    expect(events.filter((e) => String(e.message ?? "").startsWith("weight sync:"))).toEqual([]);
    expect(existsSync(new RunDir(runDir).weightsDir)).toBe(false);
    expect(new Set((await readStep(runDir, 2)).map((t) => t.weight_version))).toEqual(new Set(["1"]));
  }, 240_000);
});

describe("distributed weight sync falls back to disk", () => {
  /** Two syncs against `fake` with a stand-in worker: its disk side, and a group join that fails as a timeout would. */
  async function twoSyncs(
    fake: FakeSglang,
    settings: WeightSyncSettings = DISTRIBUTED,
    colocate = false,
  ): Promise<{ notes: string[]; saved: string[]; runDir: RunDir }> {
    const notes: string[] = [];
    const saved: string[] = [];
    const runDir = new RunDir(tempDir("wsync-fallback"));
    const worker = {
      device: "cpu",
      saveWeights: async (dir: string) => (saved.push(dir), { path: dir, step: 0 }),
      initWeightsGroup: async () => Promise.reject(new Error("RuntimeError: the rendezvous timed out")),
    } as unknown as WorkerClient;
    const client = new SglangClient({ servers: [fake.url] });
    try {
      const sync = new WeightSync(settings, { worker, client, runDir, colocate, reporter: recordingReporter(notes), partialRollout: false });
      expect(await sync.sync(3)).toBe("3");
      expect(await sync.sync(4)).toBe("4");
    } finally {
      await client.close();
    }
    return { notes, saved, runDir };
  }

  it("notes why in one line and syncs through disk when a server lacks /init_weights_update_group", async () => {
    const fake = await startFakeSglang();
    try {
      const { notes, saved, runDir } = await twoSyncs(fake);
      expect(notes).toHaveLength(1);
      expect(notes[0]).toMatch(/distributed is not possible \(.*has no \/init_weights_update_group \(HTTP 404\)\); syncing through disk instead/);
      expect(saved).toEqual([runDir.weightsDir, runDir.weightsDir]);
      expect(fake.weightVersion()).toBe("4");
      expect(fake.stats.byPath["/init_weights_update_group"]).toBe(1); // the GET probe only
    } finally {
      await fake.close();
    }
  });

  it.each([
    ["distributed", true, "distributed is not possible (trainer.colocate puts the servers on the trainer's GPUs; use method tensor there)"],
    ["tensor", false, "tensor is not possible (CUDA IPC needs the servers on the trainer's GPUs (trainer.colocate))"],
    ["tensor", true, "tensor is not possible (the worker runs on cpu; CUDA IPC needs a GPU)"],
    ["auto", true, undefined],
  ] as const)("method %s with colocate %s: disk, and the note says why", async (method, colocate, note) => {
    const fake = await startFakeSglang();
    try {
      const { notes, saved } = await twoSyncs(fake, { ...DISTRIBUTED, method }, colocate);
      expect(notes.map((n) => n.replace("weight sync: ", "").replace("; syncing through disk instead", ""))).toEqual(note ? [note] : []);
      expect(saved).toHaveLength(2);
      expect(fake.stats.byPath["/init_weights_update_group"]).toBeUndefined(); // nothing was tried
    } finally {
      await fake.close();
    }
  });

  it("does the same when the group does not form, naming the worker's and the server's reasons", async () => {
    const fake = await startFakeSglang({ refuseWeightGroup: "Failed to init process group: connection refused" });
    try {
      const { notes, saved } = await twoSyncs(fake);
      expect(notes).toHaveLength(1);
      expect(notes[0]).toContain("did not form (the worker: RuntimeError: the rendezvous timed out; ");
      expect(notes[0]).toContain(`${fake.url}: Failed to init process group: connection refused`);
      expect(saved).toHaveLength(2);
      expect(fake.weightVersion()).toBe("4");
    } finally {
      await fake.close();
    }
  });
});
