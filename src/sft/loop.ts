/**
 * The SFT loop: batches of conversations from the seeded cursor, one worker `sft_step` per batch, the validation loss
 * every test_freq steps and at the end, checkpoints, and at the end the Hugging Face folder `<run>/model` that a train
 * config's actor_rollout_ref.model.path can name. Same worker, batch files, run folder and resume rules as `train`.
 */
import { mkdirSync, rmSync } from "node:fs";
import path from "node:path";
import { WorkerError } from "../errors.js";
import { DataCursor } from "../train/data-cursor.js";
import type { RunDir, RunState } from "../train/run-dir.js";
import { writeBatch, type TrajectoryRow, type WorkerClient } from "../train/worker/index.js";
import type { SftConfig } from "./config.js";
import type { SftExample } from "./examples.js";

export type SftPhase = "train" | "validate" | "checkpoint" | "save";

export interface SftReporter {
  phase(step: number, phase: SftPhase): void;
  stepDone(step: number, metrics: Record<string, number>): void;
  validationDone(step: number, metrics: Record<string, number>): void;
  note(message: string): void;
}

export interface SftLoopOptions {
  config: SftConfig;
  runDir: RunDir;
  resumeState: RunState | undefined;
  worker: WorkerClient;
  train: SftExample[];
  val: SftExample[];
  total: number;
  padTokenId: number;
  stop: AbortSignal;
  reporter: SftReporter;
}

export interface SftLoopResult {
  lastStep: number;
  stopped: boolean;
  lastCheckpoint: string | undefined;
  /** The Hugging Face folder written at the end; undefined when the run stopped early. */
  modelDir: string | undefined;
}

export function modelDirOf(runDir: RunDir): string {
  return path.join(runDir.root, "model");
}

function rowsOf(examples: readonly SftExample[]): TrajectoryRow[] {
  return examples.map((e, i) => ({ ids: e.ids, responseMask: e.lossMask, reward: 0, groupId: i }));
}

export async function sftLoop(options: SftLoopOptions): Promise<SftLoopResult> {
  const { config, runDir, worker, reporter, total } = options;
  const cursor = new DataCursor(options.train.length, config.data.seed, config.data.shuffle, options.resumeState ? { ...options.resumeState.cursor } : undefined);
  const scratch = runDir.scratchDir;
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  let step = options.resumeState?.step ?? 0;
  let lastCheckpoint = options.resumeState ? path.join(runDir.root, options.resumeState.checkpoint) : undefined;

  const checkpoint = async (forStep: number): Promise<void> => {
    reporter.phase(forStep, "checkpoint");
    const dir = runDir.checkpointDir(forStep);
    await worker.saveCheckpoint(dir);
    await runDir.writeState({ step: forStep, cursor: cursor.position, checkpoint: runDir.relative(dir), weight_version: null });
    lastCheckpoint = dir;
  };

  /** Token-weighted loss over every validation conversation, in batches the size of a training batch. */
  const validate = async (forStep: number): Promise<Record<string, number>> => {
    if (options.val.length === 0) return {};
    reporter.phase(forStep, "validate");
    let nll = 0;
    let tokens = 0;
    const size = config.data.train_batch_size;
    for (let start = 0; start < options.val.length; start += size) {
      const file = path.join(scratch, `val-${forStep}-${start}.safetensors`);
      await writeBatch(file, rowsOf(options.val.slice(start, start + size)), options.padTokenId);
      const result = await worker.sftEval(file);
      rmSync(file, { force: true });
      nll += result.metrics["val/nll_sum"];
      tokens += result.metrics["val/tokens"];
    }
    const metrics = { "val/loss": tokens ? nll / tokens : 0, "val/tokens": tokens };
    reporter.validationDone(forStep, metrics);
    return metrics;
  };

  try {
    if (options.resumeState && lastCheckpoint) {
      await worker.loadCheckpoint(lastCheckpoint);
      runDir.truncateMetricsAfter(step);
      reporter.note(`resumed from ${runDir.relative(lastCheckpoint)} (step ${step}, epoch ${cursor.position.epoch}, conversation ${cursor.position.offset})`);
    }
    while (step < total && !options.stop.aborted) {
      const current = step + 1;
      const started = performance.now();
      reporter.phase(current, "train");
      const examples = cursor.next(Math.min(config.data.train_batch_size, options.train.length)).map((i) => options.train[i]!);
      const file = path.join(scratch, `batch-${current}.safetensors`);
      await writeBatch(file, rowsOf(examples), options.padTokenId);
      const result = await worker.sftStep(file);
      rmSync(file, { force: true });
      step = current;
      const metrics: Record<string, number> = { ...result.metrics, "sft/epoch": cursor.position.epoch };
      const last = step >= total;
      const testFreq = config.trainer.test_freq;
      if ((testFreq > 0 && step % testFreq === 0) || last) Object.assign(metrics, await validate(step));
      metrics["timing_s/step"] = (performance.now() - started) / 1000;
      runDir.appendMetrics({ step, time: Date.now() / 1000, ...metrics });
      reporter.stepDone(step, metrics);
      const saveFreq = config.trainer.save_freq;
      if ((saveFreq > 0 && step % saveFreq === 0) || last || options.stop.aborted) await checkpoint(step);
    }
    if (options.stop.aborted) {
      if (step > 0 && lastCheckpoint !== runDir.checkpointDir(step)) await checkpoint(step);
      return { lastStep: step, stopped: true, lastCheckpoint, modelDir: undefined };
    }
    reporter.phase(step, "save");
    const modelDir = modelDirOf(runDir);
    await worker.saveWeights(modelDir);
    return { lastStep: step, stopped: false, lastCheckpoint, modelDir };
  } catch (err) {
    if (err instanceof WorkerError) {
      throw err.withHint(
        lastCheckpoint
          ? `resume from ${runDir.relative(lastCheckpoint)} with: agentrl sft --config ${runDir.configFile} --resume`
          : "no checkpoint yet: fix the cause and start again",
      );
    }
    throw err;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
