/**
 * `agentrl sft`: resolves the config, reads and tokenizes the conversations before anything starts (so bad data fails
 * in a second, naming the row), starts the worker, runs the loop, and shows it: a live status line on stderr (TTY
 * only), one line per step, or one JSON object per step with --json.
 */
import path from "node:path";
import { appendFileSync, mkdirSync } from "node:fs";
import { dump as dumpYaml } from "js-yaml";
import ora from "ora";
import { ExitError, InputError, UsageError } from "../errors.js";
import { loadChatModel } from "../chat/index.js";
import { asList } from "../train/config.js";
import { RunDir } from "../train/run-dir.js";
import { sftConfigSchema, sftTotalSteps, type SftConfig } from "./config.js";
import { loadExamples, type ExampleCounts, type LoadedExamples } from "./examples.js";
import { sftLoop, modelDirOf, type SftReporter } from "./loop.js";
import type { SftFlags } from "../cli/commands/sft.js";
import { applySets, readYamlConfig, setPath, validateConfig, type ConfigTree } from "../config/tree.js";
import { handleInterrupts } from "../interrupt.js";
import { resumeCommand } from "../train/resume-hint.js";
import { formatDuration, style, writeLogTail } from "../term.js";

export async function resolveSftConfig(flags: SftFlags): Promise<SftConfig> {
  if (!flags.config) throw new UsageError("no config given", { hint: "pass --config FILE (see examples/cpu-demo-sft.yaml)" });
  const tree: ConfigTree = await readYamlConfig(flags.config);
  applySets(tree, flags.set ?? []);
  if (flags.steps) setPath(tree, "trainer.total_training_steps", flags.steps);
  if (flags.name) setPath(tree, "trainer.experiment_name", flags.name);
  return validateConfig(sftConfigSchema, tree, flags.config);
}

function runDirOf(config: SftConfig): RunDir {
  return new RunDir(config.trainer.default_local_dir ?? path.join("runs", config.trainer.experiment_name));
}

function describeCounts(counts: ExampleCounts): string {
  const parts = [`${counts.kept} of ${counts.rows} rows kept`];
  if (counts.truncated) parts.push(`${counts.truncated} truncated to data.max_length`);
  if (counts.dropped) parts.push(`${counts.dropped} dropped (over data.max_length)`);
  if (counts.filtered) parts.push(`${counts.filtered} trajectories filtered (not completed or under data.min_reward)`);
  if (counts.empty) parts.push(`${counts.empty} without an assistant token`);
  return parts.join(", ");
}

function lossTokens(loaded: LoadedExamples): number {
  return loaded.examples.reduce((sum, e) => sum + e.lossMask.reduce((a, b) => a + b, 0), 0);
}

function warmupSteps(config: SftConfig, total: number): number {
  return Math.round(config.optim.warmup_steps_ratio * total);
}

const f4 = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? "-" : x.toFixed(4));

function stepLine(step: number, total: number, m: Record<string, number>): string {
  return (
    `step ${String(step).padStart(4)}/${total} | loss ${f4(m["sft/loss"])} | grad_norm ${f4(m["sft/grad_norm"])} | ` +
    `lr ${(m["sft/lr"] ?? 0).toExponential(2)} | tokens ${Math.round(m["sft/tokens"] ?? 0)} | epoch ${m["sft/epoch"] ?? 0} | ` +
    formatDuration((m["timing_s/step"] ?? 0) * 1000)
  );
}

function consoleReporter(total: number, flags: SftFlags): SftReporter & { stop(): void } {
  const live = !flags.quiet && !flags.json && process.stderr.isTTY;
  const spinner = ora({ stream: process.stderr, isSilent: !live });
  const out = (line: string) => {
    if (spinner.isSpinning) spinner.clear();
    process.stdout.write(`${line}\n`);
    if (spinner.isSpinning) spinner.render();
  };
  const json = (record: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(record)}\n`);
  return {
    phase(step, phase) {
      if (!spinner.isSpinning && live) spinner.start();
      spinner.text = `step ${step}/${total} · ${phase}`;
    },
    stepDone(step, metrics) {
      if (flags.json) json({ event: "step", step, ...metrics });
      else out(stepLine(step, total, metrics));
    },
    validationDone(step, metrics) {
      if (flags.json) json({ event: "validation", step, ...metrics });
      else out(`${style.cyan("validation")} @ step ${step}: val/loss ${f4(metrics["val/loss"])} over ${metrics["val/tokens"]} tokens`);
    },
    note(message) {
      if (flags.json) json({ event: "note", message });
      else out(style.dim(message));
    },
    stop() {
      spinner.stop();
    },
  };
}

export async function runSftCommand(flags: SftFlags): Promise<void> {
  const config = await resolveSftConfig(flags);
  const model = await loadChatModel(config.model.partial_pretrain);
  const trainFiles = asList(config.data.train_files);
  const train = await loadExamples(model, trainFiles, config);
  const val = await loadExamples(model, asList(config.data.val_files), config);
  if (train.examples.length === 0) {
    throw new InputError(`${trainFiles.join(", ")}: no conversation to train on (${describeCounts(train.counts)})`, {
      hint: "check data.train_files, data.min_reward and data.max_length",
    });
  }
  const valFiles = asList(config.data.val_files);
  if (valFiles.length > 0 && val.examples.length === 0) {
    // Validation on nothing would log no val/loss and still look like a validated run.
    throw new InputError(`${valFiles.join(", ")}: no conversation to validate on (${describeCounts(val.counts)})`, {
      hint: "check data.val_files, data.min_reward and data.max_length, or leave data.val_files unset",
    });
  }
  const total = sftTotalSteps(config, train.examples.length);
  const runDir = runDirOf(config);
  if (flags.dryRun) {
    const implied = {
      train_rows: describeCounts(train.counts),
      val_rows: config.data.val_files === null ? "none" : describeCounts(val.counts),
      loss_tokens_per_epoch: lossTokens(train),
      longest_conversation: Math.max(...train.examples.map((e) => e.ids.length)),
      total_steps: total,
      warmup_steps: warmupSteps(config, total),
      epochs: Number(((total * config.data.train_batch_size) / train.examples.length).toFixed(2)),
      training_gpus: config.trainer.nnodes * config.trainer.n_gpus_per_node,
      run_folder: runDir.root,
      output_model: modelDirOf(runDir),
    };
    if (flags.json) {
      process.stdout.write(`${JSON.stringify({ config, implied }, null, 2)}\n`);
      return;
    }
    process.stdout.write(`# effective config\n${dumpYaml(config, { lineWidth: 120 })}\n# what it implies\n`);
    for (const [key, value] of Object.entries(implied)) process.stdout.write(`- ${key.replaceAll("_", " ")}: ${value}\n`);
    return;
  }

  const resumeState = await runDir.prepare({ resume: Boolean(flags.resume), force: Boolean(flags.force) });
  if (flags.resume && !resumeState) {
    // A run stopped before its first checkpoint: --resume starts it over, each step logged once.
    runDir.truncateMetricsAfter(-1);
  }
  await runDir.writeConfig(config);
  mkdirSync(path.dirname(runDir.logFile("worker")), { recursive: true });
  const reporter = consoleReporter(total, flags);
  reporter.note(`data: ${describeCounts(train.counts)}; validation: ${config.data.val_files === null ? "none" : describeCounts(val.counts)}`);

  const stop = handleInterrupts("finishing the current step and saving a checkpoint");

  const { WorkerClient } = await import("../train/worker/index.js");
  let worker: Awaited<ReturnType<typeof WorkerClient.start>> | undefined;
  try {
    const workerLog = runDir.logFile("worker");
    reporter.note("starting the training worker...");
    worker = await WorkerClient.start({
      nprocPerNode: config.trainer.n_gpus_per_node,
      ...(config.trainer.nnodes > 1 || config.trainer.torchrun_args.length
        ? { torchrunArgs: [`--nnodes=${config.trainer.nnodes}`, ...config.trainer.torchrun_args] }
        : {}),
      onLog: (line) => appendFileSync(workerLog, `${line}\n`),
    });
    await worker.init({
      model_path: config.model.partial_pretrain,
      seed: config.trainer.seed,
      lr: config.optim.lr,
      betas: config.optim.betas,
      weight_decay: config.optim.weight_decay,
      lr_warmup_steps: warmupSteps(config, total),
      lr_scheduler_type: config.optim.lr_scheduler,
      total_optimizer_steps: total,
      grad_clip: config.optim.clip_grad,
      gradient_checkpointing: config.model.enable_gradient_checkpointing,
      micro_batch_token_budget: config.data.max_token_len_per_gpu,
    });
    const result = await sftLoop({
      config, runDir, resumeState, worker, train: train.examples, val: val.examples, total,
      padTokenId: model.eosTokenIds[0] ?? 0, stop: stop.signal, reporter,
    });
    reporter.stop();
    const checkpoint = result.lastCheckpoint ? runDir.relative(result.lastCheckpoint) : "none";
    if (result.stopped) {
      process.stderr.write(`stopped after step ${result.lastStep}; checkpoint: ${checkpoint}\nresume with: ${resumeCommand("sft", runDir)}\n`);
      throw new ExitError(130);
    }
    if (flags.json) process.stdout.write(`${JSON.stringify({ event: "done", steps: result.lastStep, model: result.modelDir, checkpoint })}\n`);
    else process.stdout.write(`${style.green("done")}: ${result.lastStep} steps; model ${result.modelDir} (use it as actor_rollout_ref.model.path)\n`);
  } catch (err) {
    writeLogTail(err);
    throw err;
  } finally {
    reporter.stop();
    stop.dispose();
    await worker?.shutdown().catch(() => worker?.kill());
  }
}
