/**
 * The messages between the main thread and a rollout worker thread. Both ends are this package's own code, and what
 * crosses is already validated (the config by its zod schema before any thread starts, samples by the dataset
 * reader, trajectories by construction), so the messages are typed, not re-validated: the structured clone is the
 * whole transport.
 */
import type { Trajectory } from "../../data/trajectory.js";
import type { EngineStats } from "../../engine/index.js";
import type { Sample } from "../sample.js";
import type { loadRolloutParts } from "../setup.js";
import type { RolloutSection } from "../config.js";

/** A worker's workerData: everything it needs to build its own parts, client and trajectory context. */
export interface WorkerSetup {
  /** 0-based; messages name threads 1-based ("thread 2 of 4"). */
  threadIndex: number;
  threads: number;
  /** loadRolloutParts' options, plain JSON (the validated config's values). */
  parts: Parameters<typeof loadRolloutParts>[0];
  /** The rollout section the trajectories run with (server URLs already final: the embedded engine's, if any). */
  rollout: RolloutSection;
  /** This thread's share of max_concurrency: its client's request slots and connections. */
  concurrency: number;
  /** The ServerLoads every thread's client balances on (one server pool for the run); shared, not copied. */
  serverLoads: SharedArrayBuffer;
  apiKey: string | undefined;
  lengths: { maxPromptLength: number; maxResponseLength: number };
  step: number | null;
}

/** Why the run stopped, as the worker must know it: over-sampling's abort is recorded differently from a cancel. */
export type StopReason = { kind: "over_sample"; finished: number; total: number } | { kind: "cancel" };

export type ToWorker =
  | { type: "run"; task: number; sample: Sample }
  | { type: "abort"; reason: StopReason }
  | { type: "close" };

/** An error as it crosses the thread boundary: what the main thread needs to rebuild it or report it. */
export interface SentError {
  name: string;
  message: string;
  hint?: string;
  exitCode?: number;
  stack?: string;
  /** PromptTooLongError's fields: the main thread turns it back into one, so filter_overlong_prompts works as in one thread. */
  promptTooLong?: { dataIndex: number; length: number; limit: number };
}

export type FromWorker =
  | { type: "ready" }
  | { type: "start-failed"; error: SentError }
  | { type: "done"; task: number; trajectory: Trajectory }
  | { type: "failed"; task: number; error: SentError }
  | { type: "closed"; engine: EngineStats };
