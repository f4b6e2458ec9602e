/**
 * Weight sync: the worker writes the policy as a Hugging Face folder (weights/) and every server loads it with
 * /update_weights_from_disk, tagged with the step as its weight_version, so each trajectory records the policy that
 * produced it. Colocated (trainer.colocate), the engine gives its GPU memory to training before the update and takes
 * it back around the sync.
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
}

/** Colocated only: the engine's memory goes to training for the log-prob pass and the update. */
export async function releaseEngineMemory(client: SglangClient, colocate: boolean): Promise<void> {
  if (colocate) await client.releaseMemoryOccupation({});
}

/** Pushes the worker's weights to every server; returns the weight version they now serve. */
export async function syncWeights(step: number, { worker, client, runDir, colocate, reporter }: SyncDeps): Promise<string> {
  reporter.phase(step, "sync");
  if (colocate) await client.resumeMemoryOccupation({ tags: ["weights"] });
  await worker.saveWeights(runDir.weightsDir);
  const version = String(step);
  const results = await client.updateWeightsFromDisk({ modelPath: path.resolve(runDir.weightsDir), weightVersion: version });
  const failed = results.filter((r) => !r.ok || !r.value.success);
  if (failed.length) {
    const reasons = failed.map((r) => `${r.server}: ${r.ok ? r.value.message : r.error.message}`).join("; ");
    throw new AgentrlError(`weight update failed on ${failed.length} server(s): ${reasons}`, {
      hint: `resume with: ${resumeCommand("train", runDir)}`,
    });
  }
  if (colocate) await client.resumeMemoryOccupation({ tags: ["kv_cache"] });
  return version;
}
