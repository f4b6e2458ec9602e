/**
 * One sync's transfer without disk, bucket by bucket (the worker's plan: every parameter once, by Hugging Face name).
 *
 * - distributed: for each bucket, every server is told its names, dtypes and shapes (/update_weights_from_distributed)
 *   while the worker broadcasts the same tensors in the same order; both must finish before the next bucket.
 * - tensor (colocated, CUDA IPC): the worker serializes a bucket as IPC handles, then every server loads it
 *   (/update_weights_from_tensor).
 *
 * Only the last bucket carries the weight version (and flushes the cache), so a server reports the new version once it
 * holds every new tensor.
 */
import { AgentrlError } from "../errors.js";
import type { SglangClient } from "../engine/index.js";
import type { WeightBucketPlan, WorkerClient } from "./worker/index.js";
import { failedServers, type ServerRanks } from "./weight-group.js";

type Bucket = WeightBucketPlan["buckets"][number];

export interface TransferDeps {
  worker: WorkerClient;
  client: SglangClient;
  /** Said with a failure: how to pick the run up again. */
  hint: string;
}

/** Every bucket over the weight-update group `groupName`; throws naming the servers (or the worker) that failed. */
export async function broadcastBuckets(plan: WeightBucketPlan, groupName: string, version: string, { worker, client, hint }: TransferDeps): Promise<void> {
  for (const [i, bucket] of plan.buckets.entries()) {
    const last = lastBucket(plan, i, version);
    const [announced, sent] = await Promise.allSettled([
      client.updateWeightsFromDistributed({ ...bucket, groupName, ...last }),
      worker.broadcastWeights(bucket.names, bucket.dtypes[0]),
    ]);
    const failures = announced.status === "fulfilled" ? failedServers(announced.value) : [String(announced.reason)];
    if (sent.status === "rejected") failures.push(`the worker: ${(sent.reason as Error).message}`);
    if (failures.length) throw bucketError(i, plan, bucket, failures, hint);
  }
}

/** Every bucket as CUDA IPC handles; each server gets the entry once per tensor-parallel rank. */
export async function sendTensorBuckets(plan: WeightBucketPlan, version: string, ranks: ServerRanks[], { worker, client, hint }: TransferDeps): Promise<void> {
  const tp = new Map(ranks.map((r) => [r.server, r.ranks]));
  for (const [i, bucket] of plan.buckets.entries()) {
    const { serialized } = await worker.serializeWeights(bucket.names, bucket.dtypes[0]);
    const results = await client.updateWeightsFromTensor({
      serialized: (server) => new Array<string>(tp.get(server) ?? 1).fill(serialized),
      ...lastBucket(plan, i, version),
    });
    const failures = failedServers(results);
    if (failures.length) throw bucketError(i, plan, bucket, failures, hint);
  }
}

function lastBucket(plan: WeightBucketPlan, i: number, version: string): { flushCache: boolean; weightVersion?: string } {
  return i === plan.buckets.length - 1 ? { flushCache: true, weightVersion: version } : { flushCache: false };
}

function bucketError(i: number, plan: WeightBucketPlan, bucket: Bucket, failures: string[], hint: string): AgentrlError {
  const what = `bucket ${i + 1}/${plan.buckets.length} (${bucket.names[0]}${bucket.names.length > 1 ? ` … ${bucket.names.length} tensors` : ""})`;
  return new AgentrlError(`weight update failed at ${what}: ${failures.join("; ")}`, { hint });
}
