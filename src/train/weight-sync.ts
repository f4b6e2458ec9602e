/**
 * Weight sync: the worker writes the policy as a Hugging Face folder (weights/) and every server loads it with
 * /update_weights_from_disk, tagged with the step as its weight_version, so each trajectory records the policy that
 * produced it. Colocated (trainer.colocate), the engine gives its GPU memory to training before the update and takes
 * it back around the sync.
 *
 * With partial rollouts (async_training.partial_rollout, generation running during the sync), generation is paused
 * with `abort` around the load: the generations in flight come back cut, and the rollout continues each on the new
 * weights (assistant-turn.ts), instead of the load waiting for every one to finish. Generation is continued whatever
 * the load's outcome, so a failed sync never leaves the engine paused.
 */
import path from "node:path";
import { AgentrlError } from "../errors.js";
import type { SglangClient } from "../engine/index.js";
import type { WorkerClient } from "./worker/index.js";
import type { RunDir } from "./run-dir.js";
import type { TrainReporter } from "./reporter.js";
import { resumeCommand } from "./resume-hint.js";

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

/** Colocated only: the engine's memory goes to training for the log-prob pass and the update. */
export async function releaseEngineMemory(client: SglangClient, colocate: boolean): Promise<void> {
  if (colocate) await client.releaseMemoryOccupation({});
}

/** Pushes the worker's weights to every server; returns the weight version they now serve. */
export async function syncWeights(step: number, { worker, client, runDir, colocate, reporter, partialRollout }: SyncDeps): Promise<string> {
  reporter.phase(step, "sync");
  if (colocate) await client.resumeMemoryOccupation({ tags: ["weights"] });
  await worker.saveWeights(runDir.weightsDir);
  const version = String(step);
  // A server that refuses the pause still loads: it only waits for its generations to finish, as without partial rollouts.
  if (partialRollout) await client.pauseGeneration({ mode: "abort" });
  let results: Awaited<ReturnType<SglangClient["updateWeightsFromDisk"]>>;
  try {
    results = await client.updateWeightsFromDisk({ modelPath: path.resolve(runDir.weightsDir), weightVersion: version });
  } finally {
    if (partialRollout) await client.continueGeneration();
  }
  const failed = results.filter((r) => !r.ok || !r.value.success);
  if (failed.length) {
    const reasons = failed.map((r) => `${r.server}: ${r.ok ? r.value.message : r.error.message}`).join("; ");
    throw new WeightSyncError(`weight update failed on ${failed.length} server(s): ${reasons}`, {
      hint: `resume with: ${resumeCommand("train", runDir)}`,
    });
  }
  if (colocate) await client.resumeMemoryOccupation({ tags: ["kv_cache"] });
  return version;
}

/**
 * The sync after an update. A refused load is reported and the engine goes on serving the version it had: the next
 * step's sync tries again, the staleness of what it generates grows (and is bounded, fully_async) meanwhile. Only
 * MAX_CONSECUTIVE_SYNC_FAILURES in a row stop the run. Returns the version the engine serves.
 */
export class StepSync {
  private failures = 0;

  constructor(private readonly deps: SyncDeps) {}

  async sync(step: number, served: string | null): Promise<{ version: string | null; failed: boolean }> {
    try {
      const version = await syncWeights(step, this.deps);
      this.failures = 0;
      return { version, failed: false };
    } catch (err) {
      if (!(err instanceof WeightSyncError)) throw err;
      this.failures += 1;
      if (this.failures >= MAX_CONSECUTIVE_SYNC_FAILURES) {
        throw new WeightSyncError(`${this.failures} weight syncs in a row failed; the last: ${err.message}`, err.hint === undefined ? {} : { hint: err.hint });
      }
      this.deps.reporter.note(
        `step ${step}: ${err.message}; the engine keeps serving weight version ${served ?? "default"}, ` +
          `the next step syncs again (${this.failures}/${MAX_CONSECUTIVE_SYNC_FAILURES} failures in a row stop the run)`,
      );
      return { version: served, failed: true };
    }
  }
}
