/**
 * The weight sync after an update (src/train/weight-sync.ts, disk method) against the fake SGLang server: with partial
 * rollouts it pauses generation around the load and always continues it; a load the servers refuse, or one that does not answer
 * within the admin timeout, is reported and the engine keeps its version (the run goes on), until too many in a row
 * stop the run. A sync never leaves generation paused and never hangs.
 */
import { afterEach, describe, expect, it } from "vitest";
import { SglangClient } from "../src/engine/index.js";
import type { RunDir } from "../src/train/run-dir.js";
import type { TrainReporter } from "../src/train/reporter.js";
import type { WorkerClient } from "../src/train/worker/index.js";
import { MAX_CONSECUTIVE_SYNC_FAILURES, StepSync, WeightSync, WeightSyncError, type SyncDeps } from "../src/train/weight-sync.js";
import { startFakeSglang, type FakeSglang, type FakeSglangOptions } from "./fake-sglang/index.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function setup(options: FakeSglangOptions, partialRollout: boolean, adminTimeoutMs = 5_000, colocate = false) {
  const server = await startFakeSglang(options);
  cleanups.push(() => server.close());
  const client = new SglangClient({ servers: [server.url], maxRetries: 0, adminTimeoutMs });
  cleanups.push(() => client.destroy());
  const notes: string[] = [];
  const deps: SyncDeps = {
    worker: { saveWeights: async () => undefined } as unknown as WorkerClient,
    client,
    runDir: { weightsDir: "/run/weights", configFile: "/run/config.yaml" } as unknown as RunDir,
    colocate,
    reporter: { phase: () => undefined, note: (m: string) => notes.push(m) } as unknown as TrainReporter,
    partialRollout,
  };
  const settings = { method: "disk" as const, master_address: null, master_port: 0, group_timeout: 600, bucketMegabytes: 512 };
  return { server, client, notes, sync: new StepSync(new WeightSync(settings, deps), deps.reporter) };
}

const adminPaths = (server: FakeSglang) => server.stats.log.map((e) => e.path).filter((p) => p !== "/generate");

describe("weight sync", () => {
  it("with partial rollouts pauses generation, loads tagged with the step, and continues", async () => {
    const { server, sync } = await setup({}, true);
    expect(await sync.sync(3, "2")).toEqual({ version: "3", failed: false });
    expect(adminPaths(server)).toEqual(["/pause_generation", "/update_weights_from_disk", "/continue_generation"]);
    expect(server.stats.log[0]!.body).toEqual({ mode: "abort" });
    expect(server.weightVersion()).toBe("3");
  });

  it("without partial rollouts loads without pausing", async () => {
    const { server, sync } = await setup({}, false);
    await sync.sync(1, null);
    expect(adminPaths(server)).toEqual(["/update_weights_from_disk"]);
  });

  it("reports a refused load, keeps the served version, continues generation, and stops the run only after too many in a row", async () => {
    let refuse = true;
    const { server, client, notes, sync } = await setup({ onUpdateWeights: () => (refuse ? { success: false, message: "disk full" } : { success: true }) }, true);
    expect(await sync.sync(4, "3")).toEqual({ version: "3", failed: true });
    expect(notes.at(-1)).toMatch(/step 4: weight update failed on 1 server\(s\): .*disk full; the engine keeps serving weight version 3/);
    expect(adminPaths(server).at(-1)).toBe("/continue_generation");
    // Generation is not left paused: a request is answered.
    const answered = await client.generate({ inputIds: [1, 2, 3], samplingParams: { maxNewTokens: 4 } });
    expect(answered.finishReason.type).not.toBe("abort");
    // One short of the limit in a row, then a success resets the count.
    for (let i = 2; i < MAX_CONSECUTIVE_SYNC_FAILURES; i++) expect((await sync.sync(3 + i, "3")).failed).toBe(true);
    refuse = false;
    expect(await sync.sync(7, "3")).toEqual({ version: "7", failed: false });
    refuse = true;
    for (let i = 1; i < MAX_CONSECUTIVE_SYNC_FAILURES; i++) expect((await sync.sync(7 + i, "7")).failed).toBe(true);
    await expect(sync.sync(10, "7")).rejects.toThrow(WeightSyncError);
    await expect(sync.sync(11, "7")).rejects.toThrow(/weight syncs in a row failed; the last: weight update failed/);
  });

  it("colocated, a refused load still gives the engine its KV cache back: the run goes on generating", async () => {
    const { server, sync } = await setup({ onUpdateWeights: () => ({ success: false, message: "disk full" }) }, false, 5_000, true);
    expect((await sync.sync(2, "1")).failed).toBe(true);
    const calls = server.stats.log.filter((e) => e.path !== "/generate").map((e) => [e.path, e.body]);
    expect(calls).toEqual([
      ["/resume_memory_occupation", { tags: ["weights"] }],
      ["/update_weights_from_disk", expect.objectContaining({ weight_version: "2" })],
      ["/resume_memory_occupation", { tags: ["kv_cache"] }],
    ]);
  });

  it("a load stuck behind a straggler ends at the admin timeout as a failed sync, not a hang", async () => {
    // Without a pause the load waits for the generations in flight (SGLang's writer lock); this one runs 5 s.
    const { client, notes, sync } = await setup({ latencyMs: 5_000 }, false, 300);
    const straggler = client.generate({ inputIds: [1, 2, 3], samplingParams: { maxNewTokens: 4 } }).catch(() => undefined);
    const result = await sync.sync(2, "1");
    expect(result).toEqual({ version: "1", failed: true });
    expect(notes.at(-1)).toMatch(/step 2: weight update failed/);
    await client.destroy();
    await straggler;
  });
});
