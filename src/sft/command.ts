/**
 * `agentrl sft`: resolves the config, reads and tokenizes the conversations before anything starts (so bad data fails
 * in a second, naming the row), prepares the run folder, starts the worker, runs the loop, and shows it: a live status
 * line on stderr (TTY only), one line per step, or one JSON object per step with --json. The run folder, the console,
 * Ctrl-C and resuming work as in `train` (train/session.ts).
 */
import { noteUnlessQuiet, resolveModelPath } from "../config/hub-model.js";
import { style } from "../term.js";
import { printDryRun } from "../train/console.js";
import { TrainingProcesses } from "../train/processes.js";
import { resumeCommand } from "../train/resume-hint.js";
import { runDirOf, type RunDir } from "../train/run-dir.js";
import { prepareRunFolder, resolveRunConfig, superviseRun, type RunFlags } from "../train/session.js";
import { sftConfigSchema, sftTotalSteps, sftWarmupSteps, sftWorkerConfig, type SftConfig } from "./config.js";
import { describeData, loadSftInputs, type SftInputs } from "./inputs.js";
import { sftLoop, modelDirOf } from "./loop.js";
import { sftReporter } from "./reporter.js";

/** The flags of `agentrl sft` as commander parses them (src/cli/commands/sft.ts declares them): a run's own. */
export type SftFlags = RunFlags;

export async function resolveSftConfig(flags: SftFlags): Promise<SftConfig> {
  return resolveRunConfig(sftConfigSchema, "sft", flags, "pass --config FILE (see examples/cpu-demo-sft.yaml)");
}

export async function runSftCommand(flags: SftFlags): Promise<void> {
  const config = await resolveSftConfig(flags);
  if (!flags.dryRun) {
    config.model.partial_pretrain = await resolveModelPath(config.model.partial_pretrain, "model.partial_pretrain", noteUnlessQuiet(flags));
  }
  const inputs = await loadSftInputs(config);
  const total = sftTotalSteps(config, inputs.train.examples.length);
  const runDir = runDirOf(config);
  if (flags.dryRun) return printSftDryRun(config, inputs, total, runDir, Boolean(flags.json));

  const { resumeState } = await prepareRunFolder(runDir, flags, config);
  const reporter = sftReporter(total, flags);
  const data = describeData(config, inputs);
  reporter.note(`data: ${data.train}; validation: ${data.val}`);
  const processes = new TrainingProcesses();
  await superviseRun({
    stopping: "finishing the current step and saving a checkpoint",
    reporter,
    processes,
    resumeHint: resumeCommand("sft", runDir),
    runDir,
    async run(stop) {
      reporter.note("starting the training worker...");
      const worker = { trainer: config.trainer, logFile: runDir.logFile("worker"), init: sftWorkerConfig(config, total) };
      await processes.start({ signal: stop, worker });
      return sftLoop({
        config, runDir, resumeState, worker: processes.worker!, train: inputs.train.examples, val: inputs.val.examples, total,
        padTokenId: inputs.padTokenId, stop, reporter,
      });
    },
    done(result, checkpoint) {
      const { lastStep, modelDir } = result;
      if (flags.json) process.stdout.write(`${JSON.stringify({ event: "done", steps: lastStep, model: modelDir, checkpoint })}\n`);
      else process.stdout.write(`${style.green("done")}: ${lastStep} steps; model ${modelDir} (use it as actor_rollout_ref.model.path)\n`);
    },
  });
}

function printSftDryRun(config: SftConfig, inputs: SftInputs, total: number, runDir: RunDir, json: boolean): void {
  const train = inputs.train.examples;
  const data = describeData(config, inputs);
  printDryRun(config, {
    train_rows: data.train,
    val_rows: data.val,
    loss_tokens_per_epoch: train.reduce((sum, e) => sum + e.lossMask.reduce((a, b) => a + b, 0), 0),
    longest_conversation: Math.max(...train.map((e) => e.ids.length)),
    total_steps: total,
    warmup_steps: sftWarmupSteps(config, total),
    epochs: Number(((total * config.data.train_batch_size) / train.length).toFixed(2)),
    training_gpus: config.trainer.nnodes * config.trainer.n_gpus_per_node,
    run_folder: runDir.root,
    output_model: modelDirOf(runDir),
  }, json);
}
