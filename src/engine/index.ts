/** The SGLang client: see docs/engine.md. */
export { SglangClient, newRid, type SglangClientOptions } from "./client.js";
export { EngineConnectionError, EngineServerError, isEngineError, type EngineError } from "./errors.js";
export { ServerPool, type ServerPoolOptions } from "./pool.js";
export { ServerLoads } from "./server-loads.js";
export { backoffDelayMs, retryAfterMs } from "./retry.js";
export type {
  AdminResult,
  EngineStats,
  FailureKind,
  FinishReason,
  GenerateRequest,
  GenerateResult,
  ModelInfo,
  SamplingParams,
  ServerHealth,
  TopLogprob,
  UpdateWeightsResult,
} from "./types.js";
