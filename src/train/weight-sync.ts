/**
 * Weight sync: after each update the servers get the trainer's weights, tagged with the step as their weight_version,
 * so each trajectory records the policy that produced it. `actor_rollout_ref.rollout.update_weights.method` picks how:
 *
 * - disk (the default, and the fallback): the worker writes a Hugging Face folder (weights/) and every server loads
 *   it with /update_weights_from_disk;
 * - distributed: the worker's rank 0 broadcasts the tensors to every server over a process group of their own
 *   (weight-group.ts forms it on the first sync, weight-transfer.ts sends the buckets);
 * - tensor: CUDA IPC handles to a colocated server (/update_weights_from_tensor), unverified until a GPU run;
 * - auto: distributed, or disk when colocated.
 *
 * Where the chosen method cannot work (a server without the endpoint, a group that does not form), the first sync
 * says why in one line and every sync uses disk. Colocated (trainer.colocate), the engine gives its GPU memory to
 * training before the update and takes it back around the sync.
 *
 * With partial rollouts (async_training.partial_rollout, generation running during the sync), generation is paused
 * with `abort` around the load: the generations in flight come back cut, and the rollout continues each on the new
 * weights (assistant-turn.ts), instead of the load waiting for every one to finish; no token is sampled from a mix of
 * old and new buckets either. Generation is continued whatever the load's outcome, so a sync never leaves the engine
 * paused. A load the servers refuse is a WeightSyncError, which StepSync turns into a reported, survivable step.
 */
import { rmSync } from "node:fs";
import path from "node:path";
import { AgentrlError } from "../errors.js";
import type { SglangClient } from "../engine/index.js";
import type { WeightBucketPlan, WorkerClient } from "./worker/index.js";
import type { RunDir } from "./run-dir.js";
import type { TrainReporter } from "./reporter.js";
import type { UpdateWeightsConfig } from "./config.js";
import { resumeCommand } from "./resume-hint.js";
import { failedServers, formWeightGroup, missingEndpoint, serverRanks, type Formed, type ServerRanks } from "./weight-group.js";
import { broadcastBuckets, sendTensorBuckets, type TransferDeps } from "./weight-transfer.js";

export interface SyncDeps {
  worker: WorkerClient;
  client: SglangClient;
  runDir: RunDir;
  colocate: boolean;
  reporter: TrainReporter;
  /** Generation may be running: pause (abort) it for the load, then continue it. */
  partialRollout: boolean;
}

/** The servers refused or failed the load; the worker and the run are fine, and the servers keep their old weights. */
export class WeightSyncError extends AgentrlError {}

/** Consecutive failed syncs after which a run stops rather than train on ever staler samples. */
export const MAX_CONSECUTIVE_SYNC_FAILURES = 3;

export interface WeightSyncSettings extends UpdateWeightsConfig {
  /** actor_rollout_ref.rollout.update_weights_bucket_megabytes */
  bucketMegabytes: number;
  /** LoRA without lora.merge: each sync sends the adapter alone (/load_lora_adapter), whatever `method` says. */
  loraAdapter?: boolean;
}

/** How every sync of the run sends the weights, decided at the first. */
type Route =
  | { kind: "disk" }
  | { kind: "adapter" }
  | { kind: "distributed"; plan: WeightBucketPlan; group: string }
  | { kind: "tensor"; plan: WeightBucketPlan; ranks: ServerRanks[] };

/** Colocated only: the engine's memory goes to training for the log-prob pass and the update. */
export async function releaseEngineMemory(client: SglangClient, colocate: boolean): Promise<void> {
  if (colocate) await client.releaseMemoryOccupation({});
}

export class WeightSync {
  private route: Promise<Route> | undefined;

  constructor(
    private readonly settings: WeightSyncSettings,
    private readonly deps: SyncDeps,
  ) {}

  /** Pushes the worker's weights to every server; returns the weight version they now serve. */
  async sync(step: number): Promise<string> {
    const { client, colocate, reporter } = this.deps;
    reporter.phase(step, "sync");
    if (colocate) await client.resumeMemoryOccupation({ tags: ["weights"] });
    const version = String(step);
    const route = await (this.route ??= this.chooseRoute());
    const transfer: TransferDeps = { worker: this.deps.worker, client, hint: `resume with: ${resumeCommand("train", this.deps.runDir)}` };
    try {
      if (route.kind === "distributed") await this.paused(() => broadcastBuckets(route.plan, route.group, version, transfer));
      else if (route.kind === "tensor") await this.paused(() => sendTensorBuckets(route.plan, version, route.ranks, transfer));
      else if (route.kind === "adapter") await this.syncAdapter(version, transfer.hint);
      else await this.syncFromDisk(version, transfer.hint);
    } finally {
      // Also after a refused load, which the run survives (StepSync): the engine generates next, on its old weights.
      if (colocate) await client.resumeMemoryOccupation({ tags: ["kv_cache"] });
    }
    return version;
  }

  private async syncFromDisk(version: string, hint: string): Promise<void> {
    const { worker, client, runDir } = this.deps;
    await worker.saveWeights(runDir.weightsDir);
    const loaded = await this.paused(() => client.updateWeightsFromDisk({ modelPath: path.resolve(runDir.weightsDir), weightVersion: version }));
    const failed = failedServers(loaded);
    if (failed.length) throw new WeightSyncError(`weight update failed on ${failed.length} server(s): ${failed.join("; ")}`, { hint });
  }

  /**
   * LoRA: the worker writes the adapter (a few MB, not the model) to lora/<version>; every server unloads the one it
   * served and loads this one under the version as its name, then reports that version; from then on every /generate
   * names it in lora_path. A server that refuses keeps the old adapter, and the requests keep naming it.
   */
  private async syncAdapter(version: string, hint: string): Promise<void> {
    const { worker, client, runDir } = this.deps;
    const dir = path.resolve(path.dirname(runDir.weightsDir), "lora", version);
    await worker.saveAdapter(dir);
    const previous = client.loraAdapter;
    await this.paused(async () => {
      const failed = failedServers(await client.loadLoraAdapter(version, dir));
      if (failed.length) {
        // Where some loaded, unload it again: every server keeps serving the previous adapter, as before the sync.
        await client.unloadLoraAdapter(version);
        throw new WeightSyncError(`LoRA adapter load failed on ${failed.length} server(s): ${failed.join("; ")}`, { hint });
      }
      client.loraAdapter = version;
      await client.updateWeightVersion(version);
      if (previous !== null && previous !== version) await client.unloadLoraAdapter(previous);
    });
    if (previous !== null && previous !== version) rmSync(path.resolve(path.dirname(runDir.weightsDir), "lora", previous), { recursive: true, force: true });
  }

  /** Runs the load with generation paused, when partial rollouts are on; generation always continues afterwards. */
  private async paused<T>(load: () => Promise<T>): Promise<T> {
    if (!this.deps.partialRollout) return load();
    const { client } = this.deps;
    // A server that refuses the pause still loads: it only waits for its generations to finish, as without partial rollouts.
    await client.pauseGeneration({ mode: "abort" });
    try {
      return await load();
    } finally {
      await client.continueGeneration();
    }
  }

  private async chooseRoute(): Promise<Route> {
    const { method } = this.settings;
    if (this.settings.loraAdapter) return { kind: "adapter" };
    const wanted = method === "auto" ? (this.deps.colocate ? "disk" : "distributed") : method;
    if (wanted === "disk") return { kind: "disk" };
    const formed = wanted === "distributed" ? await this.distributed() : await this.tensor();
    if (formed.ok) return formed.value;
    this.deps.reporter.note(`weight sync: ${wanted} is not possible (${formed.reason}); syncing through disk instead`);
    return { kind: "disk" };
  }

  private async distributed(): Promise<Formed<Route>> {
    if (this.deps.colocate) return { ok: false, reason: "trainer.colocate puts the servers on the trainer's GPUs; use method tensor there" };
    const { worker, client } = this.deps;
    const settings = { masterAddress: this.settings.master_address, masterPort: this.settings.master_port, timeoutS: this.settings.group_timeout };
    const group = await formWeightGroup(worker, client, settings);
    return group.ok ? { ok: true, value: { kind: "distributed", plan: await this.plan(), group: group.value.name } } : group;
  }

  private async tensor(): Promise<Formed<Route>> {
    if (!this.deps.colocate) return { ok: false, reason: "CUDA IPC needs the servers on the trainer's GPUs (trainer.colocate)" };
    if (!this.deps.worker.device?.startsWith("cuda")) return { ok: false, reason: `the worker runs on ${this.deps.worker.device ?? "an unknown device"}; CUDA IPC needs a GPU` };
    const missing = await missingEndpoint(this.deps.client, ["/update_weights_from_tensor"]);
    if (missing) return { ok: false, reason: missing };
    const ranks = await serverRanks(this.deps.client);
    return ranks.ok ? { ok: true, value: { kind: "tensor", plan: await this.plan(), ranks: ranks.value } } : ranks;
  }

  private plan(): Promise<WeightBucketPlan> {
    return this.deps.worker.planWeightBuckets(this.settings.bucketMegabytes * 1024 * 1024);
  }
}

/**
 * The sync after an update. A refused load is reported and the engine goes on serving the version it had: the next
 * step's sync tries again, the staleness of what it generates grows (and is bounded, fully_async) meanwhile. Only
 * MAX_CONSECUTIVE_SYNC_FAILURES in a row stop the run. Returns the version the engine serves.
 */
export class StepSync {
  private failures = 0;

  constructor(
    private readonly weightSync: Pick<WeightSync, "sync">,
    private readonly reporter: Pick<TrainReporter, "note">,
  ) {}

  async sync(step: number, served: string | null): Promise<{ version: string | null; failed: boolean }> {
    try {
      const version = await this.weightSync.sync(step);
      this.failures = 0;
      return { version, failed: false };
    } catch (err) {
      if (!(err instanceof WeightSyncError)) throw err;
      this.failures += 1;
      if (this.failures >= MAX_CONSECUTIVE_SYNC_FAILURES) {
        throw new WeightSyncError(`${this.failures} weight syncs in a row failed; the last: ${err.message}`, err.hint === undefined ? {} : { hint: err.hint });
      }
      this.reporter.note(
        `step ${step}: ${err.message}; the engine keeps serving weight version ${served ?? "default"}, ` +
          `the next step syncs again (${this.failures}/${MAX_CONSECUTIVE_SYNC_FAILURES} failures in a row stop the run)`,
      );
      return { version: served, failed: true };
    }
  }
}
