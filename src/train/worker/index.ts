/** The TypeScript side of the training worker protocol (docs/worker-protocol.md). */
export { WorkerClient, type WorkerStartOptions } from "./client.js";
export { batchTensors, writeBatch, type TrajectoryRow } from "./batch.js";
export { encodeSafetensors, readSafetensors, writeSafetensors, type TensorData } from "./safetensors.js";
export type {
  ComputeLogProbsResult,
  FingerprintResult,
  InitResult,
  PathResult,
  UpdateResult,
  WeightBucketPlan,
  WorkerInitConfig,
} from "./protocol.js";
