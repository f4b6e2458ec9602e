/**
 * `agentrl export RUN --out DIR`: a run's checkpoint as a Hugging Face folder (config, tokenizer, model.safetensors)
 * that transformers, SGLang, `agentrl serve` and a config's model path load like any model. A LoRA run's adapter is
 * merged into its base (W + B·A·(alpha/r)), or written alone as a PEFT folder with --adapter.
 *
 * It runs the training worker the run trained with, on one rank (checkpoints hold the full state, whatever the world
 * size), loads the checkpoint and saves, so the folder is byte for byte what the worker's own save_weights and
 * save_adapter write during the run: the same merge, the same names, the same dtype.
 */
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { InputError, UsageError } from "../errors.js";
import { applySets, readYamlConfig, validateConfig, type ConfigTree } from "../config/tree.js";
import { noteUnlessQuiet, resolveModelPath } from "../config/hub-model.js";
import { checkOutputPath } from "../data/output-path.js";
import { sftConfigSchema, sftTotalSteps, sftWorkerConfig } from "../sft/config.js";
import { trainConfigSchema, type TrainConfig } from "../train/config.js";
import { TrainingProcesses } from "../train/processes.js";
import { RunDir } from "../train/run-dir.js";
import { grpoWorkerConfig } from "../train/worker-config.js";
import type { WorkerInitConfig } from "../train/worker/index.js";
import type { WEIGHT_DTYPES } from "../train/worker/protocol.js";
import { style } from "../term.js";

export interface ExportFlags {
  out: string;
  step?: number;
  adapter?: boolean;
  dtype?: (typeof WEIGHT_DTYPES)[number];
  set?: string[];
  force?: boolean;
  json?: boolean;
  quiet?: boolean;
}

export interface ExportResult {
  run: string;
  step: number;
  checkpoint: string;
  out: string;
  /** model: a whole Hugging Face model (a LoRA run's adapter merged in); adapter: the PEFT adapter alone. */
  kind: "model" | "adapter";
  lora: boolean;
}

export async function runExportCommand(run: string, flags: ExportFlags): Promise<void> {
  const runDir = new RunDir(run);
  if (!existsSync(runDir.configFile)) {
    throw new InputError(`${run}: not a run folder (no config.yaml)`, { hint: "name the folder agentrl train or agentrl sft wrote, e.g. runs/cpu-demo" });
  }
  const checkpoint = await checkpointOf(runDir, flags.step);
  const init = await exportInit(runDir, flags);
  const lora = (init.lora_rank ?? 0) > 0;
  if (flags.adapter && !lora) {
    throw new UsageError(`--adapter: ${run} trained every weight (lora_rank 0), so it has no adapter`, { hint: "leave out --adapter to export the model" });
  }
  if (flags.adapter && flags.dtype) throw new UsageError("--dtype applies to the model; an adapter is written as PEFT saves it (float32)");
  await checkOutputFolder(flags.out, runDir, Boolean(flags.force));

  const note = flags.quiet || flags.json ? () => undefined : (line: string) => process.stderr.write(`${line}\n`);
  const processes = new TrainingProcesses();
  try {
    note(`starting the training worker to load ${runDir.relative(checkpoint.dir)}...`);
    const stop = new AbortController();
    // One rank on this machine: the checkpoint holds the full state, and export needs no reference model.
    const trainer = { n_gpus_per_node: 1, nnodes: 1, torchrun_args: [] };
    await processes.start({ signal: stop.signal, worker: { trainer, logFile: runDir.logFile("export"), init } });
    const worker = processes.worker!;
    await worker.loadCheckpoint(checkpoint.dir);
    note(`writing ${flags.adapter ? "the adapter" : lora ? "the merged model" : "the model"} to ${flags.out}...`);
    if (flags.adapter) await worker.saveAdapter(flags.out);
    else await worker.saveWeights(flags.out, flags.dtype);
  } finally {
    await processes.stop();
  }
  const result: ExportResult = {
    run,
    step: checkpoint.step,
    checkpoint: checkpoint.dir,
    out: flags.out,
    kind: flags.adapter ? "adapter" : "model",
    lora,
  };
  if (flags.json) process.stdout.write(`${JSON.stringify({ event: "done", ...result })}\n`);
  else {
    const what = flags.adapter ? "LoRA adapter (PEFT folder)" : lora ? "model with its LoRA adapter merged" : "model";
    process.stdout.write(`${style.green("done")}: step ${checkpoint.step}'s ${what} in ${flags.out}\n`);
  }
}

/** The checkpoint `--step` names, else the run's last one (state.json). */
async function checkpointOf(runDir: RunDir, step: number | undefined): Promise<{ dir: string; step: number }> {
  const steps = savedSteps(runDir);
  if (step !== undefined) {
    if (!steps.includes(step)) {
      throw new InputError(`${runDir.root}: no checkpoint of step ${step}`, { hint: steps.length ? `its checkpoints: steps ${steps.join(", ")}` : "it has no checkpoint" });
    }
    return { dir: runDir.checkpointDir(step), step };
  }
  const state = await runDir.readState();
  if (!state || state.step === 0) {
    throw new InputError(`${runDir.root}: the run has no checkpoint yet`, { hint: "a run saves one every trainer.save_freq steps, at its end and on Ctrl-C" });
  }
  return { dir: path.join(runDir.root, state.checkpoint), step: state.step };
}

function savedSteps(runDir: RunDir): number[] {
  const folder = path.join(runDir.root, "checkpoints");
  if (!existsSync(folder)) return [];
  return readdirSync(folder)
    .map((name) => /^step-(\d+)$/.exec(name)?.[1])
    .filter((digits): digits is string => digits !== undefined)
    .map(Number)
    .sort((a, b) => a - b);
}

/**
 * The worker's init from the run's own config.yaml (train or sft, told apart by its keys), with --set applied: the
 * model the run started from and its LoRA shape, which loading the checkpoint needs. No reference model; the schedule
 * is whatever the checkpoint restores.
 */
async function exportInit(runDir: RunDir, flags: ExportFlags): Promise<WorkerInitConfig> {
  const tree: ConfigTree = await readYamlConfig(runDir.configFile);
  applySets(tree, flags.set ?? []);
  const quiet = () => undefined;
  const onNote = noteUnlessQuiet({ quiet: flags.quiet || flags.json });
  if ("actor_rollout_ref" in tree) {
    const config = validateConfig(trainConfigSchema, "train", tree, runDir.configFile, quiet);
    const model = config.actor_rollout_ref.model;
    model.path = await resolveModelPath(model.path, "actor_rollout_ref.model.path", onNote);
    return trainExportInit(config);
  }
  const config = validateConfig(sftConfigSchema, "sft", tree, runDir.configFile, quiet);
  config.model.partial_pretrain = await resolveModelPath(config.model.partial_pretrain, "model.partial_pretrain", onNote);
  return sftWorkerConfig(config, sftTotalSteps(config, 1));
}

/**
 * A train run's worker init for export: the run's model, LoRA shape and optimizer (the checkpoint restores its state),
 * without a reference model, whether the start model's copy or ref.model.path's (the worker refuses a reference path
 * without use_ref).
 */
export function trainExportInit(config: TrainConfig): WorkerInitConfig {
  const { ref_model_path: _reference, ...init } = grpoWorkerConfig(config, 1);
  return { ...init, use_ref: false, use_kl_loss: false };
}

/** The worker replaces the output folder whole: never a folder that holds anything else unless --force says so. */
async function checkOutputFolder(out: string, runDir: RunDir, force: boolean): Promise<void> {
  await checkOutputPath(out, "folder");
  const target = path.resolve(out);
  const run = path.resolve(runDir.root);
  if (target === run || run.startsWith(`${target}${path.sep}`) || target === path.resolve(".")) {
    throw new UsageError(`--out ${out}: export replaces that folder, which holds the run or the working folder`, { hint: "name a new folder, e.g. --out exported/model" });
  }
  if (existsSync(target) && readdirSync(target).length > 0 && !force) {
    throw new UsageError(`--out ${out}: the folder exists and is not empty`, { hint: "name a new folder, or add --force to replace it" });
  }
}
