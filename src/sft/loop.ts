/**
 * The SFT loop: batches of conversations from the seeded cursor, one worker `sft_step` per batch, the validation loss
 * every test_freq steps and at the end, checkpoints, and at the end the Hugging Face folder `<run>/model` that a train
 * config's actor_rollout_ref.model.path can name. Same worker, batch files, run folder and resume rules as `train`
 * (train/checkpoint.ts).
 */
import path from "node:path";
import { rmSync } from "node:fs";
import { RunProgress, type RunOutcome } from "../train/checkpoint.js";
import type { RunDir, RunState } from "../train/run-dir.js";
import { writeBatch, type TrajectoryRow, type WorkerClient } from "../train/worker/index.js";
import type { SftConfig } from "./config.js";
import type { SftExample } from "./examples.js";
import type { SftReporter } from "./reporter.js";

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

export interface SftLoopResult extends RunOutcome {
  /** The Hugging Face folder written at the end; undefined when the run stopped early. */
  modelDir: string | undefined;
}

export function modelDirOf(runDir: RunDir): string {
  return path.join(runDir.root, "model");
}

export async function sftLoop(options: SftLoopOptions): Promise<SftLoopResult> {
  const { config, runDir, worker, reporter, total, stop } = options;
  const progress = new RunProgress(runDir, options.train.length, config.data, options.resumeState, config.trainer.max_ckpt_to_keep);
  runDir.clearScratch();
  try {
    if (progress.resumed) await progress.resume(worker, reporter, { keepMetrics: false, unit: "conversation" });
    while (progress.step < total && !stop.aborted) await sftStep(progress.step + 1, progress, options);
    if (stop.aborted) {
      await progress.saveOnStop(worker, reporter);
      return { ...progress.outcome(true), modelDir: undefined };
    }
    reporter.phase(progress.step, "save");
    const modelDir = modelDirOf(runDir);
    await worker.saveWeights(modelDir);
    return { ...progress.outcome(false), modelDir };
  } catch (err) {
    throw progress.withResumeHint(err, "sft");
  } finally {
    runDir.removeScratch();
  }
}

async function sftStep(step: number, progress: RunProgress, options: SftLoopOptions): Promise<void> {
  const { config, reporter, stop } = options;
  const started = performance.now();
  reporter.phase(step, "train");
  const examples = progress.cursor.next(Math.min(config.data.train_batch_size, options.train.length)).map((i) => options.train[i]!);
  const result = await withBatchFile(options, `batch-${step}`, examples, (file) => options.worker.sftStep(file));
  progress.step = step;
  const metrics: Record<string, number> = { ...result.metrics, "sft/epoch": progress.cursor.position.epoch };
  const last = step >= options.total;
  const testFreq = config.trainer.test_freq;
  if ((testFreq > 0 && step % testFreq === 0) || last) Object.assign(metrics, await validate(step, options));
  metrics["timing_s/step"] = (performance.now() - started) / 1000;
  options.runDir.appendMetrics({ step, time: Date.now() / 1000, ...metrics });
  reporter.stepDone(step, metrics);
  if (progress.due(config.trainer.save_freq, last, stop.aborted)) await progress.save(options.worker, reporter);
}

/** Token-weighted loss over every validation conversation, in batches the size of a training batch. */
async function validate(step: number, options: SftLoopOptions): Promise<Record<string, number>> {
  if (options.val.length === 0) return {};
  options.reporter.phase(step, "validate");
  let nll = 0;
  let tokens = 0;
  const size = options.config.data.train_batch_size;
  for (let start = 0; start < options.val.length; start += size) {
    const examples = options.val.slice(start, start + size);
    const result = await withBatchFile(options, `val-${step}-${start}`, examples, (file) => options.worker.sftEval(file));
    nll += result.metrics["val/nll_sum"];
    tokens += result.metrics["val/tokens"];
  }
  const metrics = { "val/loss": tokens ? nll / tokens : 0, "val/tokens": tokens };
  options.reporter.validationDone(step, metrics);
  return metrics;
}

/** Writes the examples as a batch file in the scratch folder, hands it to the worker, then removes it. */
async function withBatchFile<T>(
  options: SftLoopOptions,
  name: string,
  examples: readonly SftExample[],
  use: (file: string) => Promise<T>,
): Promise<T> {
  const file = path.join(options.runDir.scratchDir, `${name}.safetensors`);
  const rows: TrajectoryRow[] = examples.map((e, i) => ({ ids: e.ids, responseMask: e.lossMask, reward: 0, groupId: i }));
  await writeBatch(file, rows, options.padTokenId);
  const result = await use(file);
  rmSync(file, { force: true });
  return result;
}
