/**
 * `agentrl train`: resolves the config, starts the engine and the worker, runs the loop, and shows it: a live
 * status line on stderr (TTY only), one summary line per step, or one JSON object per step with --json.
 */
import path from "node:path";
import { appendFileSync, mkdirSync } from "node:fs";
import { dump as dumpYaml } from "js-yaml";
import ora from "ora";
import { AgentrlError, ExitError, InputError, UsageError } from "../errors.js";
import { overSampleTarget } from "../rollout/over-sample.js";
import { readParquetInfo } from "../data/parquet.js";
import { readPrompts, type Prompt } from "../rollout/sample.js";
import { loadRolloutParts, makeClient, readApiKey } from "../rollout/setup.js";
import { trainConfigSchema, asList, type TrainConfig } from "./config.js";
import { optimizerStepsPerStep, totalOptimizerSteps, totalSteps, trainLoop, type TrainReporter } from "./loop.js";
import { RunDir } from "./run-dir.js";
import type { TrainFlags } from "../cli/commands/train.js";
import { applySets, readYamlConfig, setPath, validateConfig, type ConfigTree } from "../config/tree.js";
import { handleInterrupts } from "../interrupt.js";
import { repeatCommand, resumeCommand } from "./resume-hint.js";
import { formatDuration, style, writeLogTail } from "../term.js";

export async function resolveTrainConfig(flags: TrainFlags): Promise<TrainConfig> {
  if (!flags.config) throw new UsageError("no config given", { hint: "pass --config FILE (see examples/ for ready ones)" });
  const tree: ConfigTree = await readYamlConfig(flags.config);
  applySets(tree, flags.set ?? []);
  if (flags.server?.length) {
    setPath(tree, "actor_rollout_ref.rollout.server.urls", flags.server);
    setPath(tree, "actor_rollout_ref.rollout.name", "sglang");
  }
  if (flags.engine) setPath(tree, "actor_rollout_ref.rollout.name", flags.engine);
  if (flags.colocate) setPath(tree, "trainer.colocate", true);
  if (flags.steps) setPath(tree, "trainer.total_training_steps", flags.steps);
  if (flags.name) setPath(tree, "trainer.experiment_name", flags.name);
  return validateConfig(trainConfigSchema, tree, flags.config);
}

export function runDirOf(config: TrainConfig): RunDir {
  return new RunDir(config.trainer.default_local_dir ?? path.join("runs", config.trainer.experiment_name));
}

async function countRows(files: string[]): Promise<number | null> {
  let total = 0;
  for (const file of files) {
    try {
      total += (await readParquetInfo(file)).numRows;
    } catch {
      return null;
    }
  }
  return total;
}

async function printDryRun(config: TrainConfig, json: boolean): Promise<void> {
  const rollout = config.actor_rollout_ref.rollout;
  const actor = config.actor_rollout_ref.actor;
  const trainRows = await countRows(asList(config.data.train_files));
  const perStep = config.data.train_batch_size * rollout.n;
  const miniBatch = actor.ppo_mini_batch_size ?? config.data.train_batch_size;
  const implied = {
    prompts_per_step: config.data.train_batch_size,
    trajectories_per_step: perStep,
    mini_batches_per_step: Math.ceil(config.data.train_batch_size / miniBatch) * actor.ppo_epochs,
    optimizer_steps_per_step: Math.ceil(config.data.train_batch_size / miniBatch) * actor.ppo_epochs,
    token_budget_per_trajectory: config.data.max_prompt_length + config.data.max_response_length,
    requests_in_flight: Math.min(rollout.max_concurrency, perStep),
    over_sampling:
      rollout.over_sample_rate > 0
        ? `each step's rollout stops once ${overSampleTarget(perStep, rollout.over_sample_rate)} of ${perStep} have finished`
        : "off",
    total_steps: trainRows === null ? null : totalSteps(config, trainRows),
    lr_schedule: lrScheduleText(config, trainRows === null ? null : totalOptimizerSteps(config, trainRows)),
    training_gpus: config.trainer.nnodes * config.trainer.n_gpus_per_node,
    inference:
      rollout.name === "embedded"
        ? "agentrl's embedded engine (started by train)"
        : `${rollout.server.urls.length} SGLang server URL(s)${config.trainer.colocate ? ", colocated with training" : ""}`,
    run_folder: runDirOf(config).root,
  };
  if (json) {
    process.stdout.write(`${JSON.stringify({ config, implied }, null, 2)}\n`);
    return;
  }
  process.stdout.write(`# effective config\n${dumpYaml(config, { lineWidth: 120 })}\n# what it implies\n`);
  for (const [key, value] of Object.entries(implied)) process.stdout.write(`- ${key.replaceAll("_", " ")}: ${value ?? "unknown (train_files not readable)"}\n`);
}

/** The learning-rate schedule in words, for --dry-run (the worker's lr_schedule.py computes it). */
function lrScheduleText(config: TrainConfig, totalOptimizer: number | null): string {
  const optim = config.actor_rollout_ref.actor.optim;
  const warmup =
    optim.lr_warmup_steps >= 0 ? String(optim.lr_warmup_steps)
    : totalOptimizer === null ? `${optim.lr_warmup_steps_ratio} × the run's`
    : String(Math.floor(optim.lr_warmup_steps_ratio * totalOptimizer));
  const after =
    (optim.warmup_style ?? optim.lr_scheduler_type) === "cosine"
      ? `cosine down to ${optim.min_lr_ratio} × lr at optimizer step ${totalOptimizer ?? "?"}`
      : "constant";
  const perStep = optimizerStepsPerStep(config);
  const steps = `${perStep} optimizer step${perStep === 1 ? "" : "s"} per training step`;
  return warmup === "0" ? `lr ${optim.lr}, ${after} (${steps})` : `lr ${optim.lr}, linear warm-up from 0 over ${warmup} optimizer steps, then ${after} (${steps})`;
}

/**
 * What to run to continue after Ctrl-C or a crash: the run folder's own config.yaml (resume-hint.ts). Validating a
 * checkpoint keeps the training config.yaml there, so that one is repeated as typed instead.
 */
export function trainResumeHint(config: TrainConfig, flags: TrainFlags, runDir: RunDir, argv = process.argv.slice(2)): string {
  const command = config.trainer.val_only && flags.resume ? repeatCommand(argv) : resumeCommand("train", runDir);
  // The key is never printed or stored, so the hint can only say that it is needed again.
  return flags.apiKey ? `${command} (with your --api-key again)` : command;
}

async function loadAll(files: string[], limit: number | null): Promise<Prompt[]> {
  const prompts: Prompt[] = [];
  for (const file of files) {
    for await (const prompt of readPrompts(file)) {
      if (limit !== null && prompts.length >= limit) return prompts;
      // Indices run on across files, so every prompt of the run has its own data_index.
      prompts.push({ ...prompt, dataIndex: prompts.length });
    }
  }
  return prompts;
}

const f3 = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? "-" : x.toFixed(3));
/** Three decimals, or three significant digits below 0.001: an early KL of 4e-5 must not read as 0.000. */
const small3 = (x: number | undefined) => (x !== undefined && x !== 0 && Math.abs(x) < 0.001 ? x.toExponential(2) : f3(x));

/**
 * One line per step. The KL to the reference (actor/kl_loss) and the pre-clip gradient norm sit next to the reward,
 * because a collapse shows there first: KL and grad norm climb while the reward falls.
 */
function stepLine(step: number, total: number, m: Record<string, number>): string {
  const timing = `${formatDuration((m["timing_s/step"] ?? 0) * 1000)} (gen ${(m["timing_s/gen"] ?? 0).toFixed(1)}s, train ${((m["timing_s/old_log_prob"] ?? 0) + (m["timing_s/update_actor"] ?? 0)).toFixed(1)}s, sync ${(m["timing_s/update_weights"] ?? 0).toFixed(1)}s)`;
  return (
    `step ${String(step).padStart(4)}/${total} | reward ${f3(m["critic/rewards/mean"])} | acc ${f3(m["acc/mean"])} | ` +
    `kl ${small3(m["actor/kl_loss"] ?? m["actor/ppo_kl"])} | grad_norm ${f3(m["actor/grad_norm"])} | ` +
    `pg_loss ${f3(m["actor/pg_loss"])} | clip ${f3(m["actor/pg_clipfrac"])} | ` +
    `len ${Math.round(m["response_length/mean"] ?? 0)} | turns ${f3(m["num_turns/mean"])} | tools ${f3(m["tool/calls_per_traj"])} | ${timing}`
  );
}

function consoleReporter(total: number, flags: TrainFlags): TrainReporter & { stop(): void } {
  const live = !flags.quiet && !flags.json && process.stderr.isTTY;
  const spinner = ora({ stream: process.stderr, isSilent: !live });
  let phaseText = "";
  let progressText = "";
  const render = () => {
    spinner.text = `${phaseText}${progressText}`;
  };
  const out = (line: string) => {
    if (spinner.isSpinning) spinner.clear();
    process.stdout.write(`${line}\n`);
    if (spinner.isSpinning) spinner.render();
  };
  return {
    phase(step, phase) {
      if (!spinner.isSpinning && live) spinner.start();
      phaseText = `step ${step}/${total} · ${phase}`;
      progressText = "";
      render();
    },
    rolloutProgress(_step, done, of, stats) {
      const s = stats.summary();
      progressText = ` ${done}/${of} · reward ${s.reward.mean.toFixed(3)} · acc ${(100 * s.accuracy).toFixed(0)}% · tools/traj ${s.toolCallsPerTrajectory.toFixed(2)}`;
      render();
    },
    stepDone(step, metrics) {
      if (flags.json) process.stdout.write(`${JSON.stringify({ event: "step", step, ...metrics })}\n`);
      else out(stepLine(step, total, metrics));
    },
    validationDone(step, metrics) {
      if (flags.json) process.stdout.write(`${JSON.stringify({ event: "validation", step, ...metrics })}\n`);
      else out(`${style.cyan("validation")} @ step ${step}: ${Object.entries(metrics).map(([k, v]) => `${k} ${v.toFixed(3)}`).join(" | ")}`);
    },
    note(message) {
      if (flags.json) process.stdout.write(`${JSON.stringify({ event: "note", message })}\n`);
      else out(style.dim(message));
    },
    stop() {
      spinner.stop();
    },
  };
}

export async function runTrainCommand(flags: TrainFlags): Promise<void> {
  const config = await resolveTrainConfig(flags);
  if (flags.dryRun) {
    await printDryRun(config, Boolean(flags.json));
    return;
  }
  const valOnly = config.trainer.val_only;
  if (valOnly && asList(config.data.val_files).length === 0) {
    throw new InputError(`${flags.config}: trainer.val_only needs data.val_files (the prompts to validate on)`, {
      hint: "set data.val_files, e.g. --set data.val_files=data/test.parquet",
    });
  }
  const rollout = config.actor_rollout_ref.rollout;
  // Inputs before outputs: a missing, empty or wrong-schema dataset, a bad model folder, tool or interaction config or
  // reward module fails here, naming the file, before the run folder is made and before the engine and worker spend
  // seconds starting.
  const trainPrompts = await loadAll(asList(config.data.train_files), null);
  const valPrompts = await loadAll(asList(config.data.val_files), config.data.val_max_samples);
  const parts = await loadRolloutParts({
    modelPath: config.actor_rollout_ref.model.path,
    rollout,
    rewardModulePath: config.custom_reward_function.path,
    rewardName: config.custom_reward_function.name,
    rewardKwargs: config.custom_reward_function.reward_kwargs,
  });
  const runDir = runDirOf(config);
  const resumeHint = trainResumeHint(config, flags, runDir);
  let resumeState;
  try {
    resumeState = await runDir.prepare({ resume: Boolean(flags.resume), force: Boolean(flags.force) });
  } catch (err) {
    await parts.close();
    throw err;
  }
  const startedOver = Boolean(flags.resume) && !resumeState;
  if (startedOver) {
    // A run stopped before its first checkpoint left nothing to continue from: --resume starts it over (verl's
    // resume_mode auto) and drops its metric lines, so each step is logged once. Validating only trains nothing,
    // so it keeps them (and validates model.path at step 0).
    if (!valOnly) runDir.truncateMetricsAfter(-1);
  }
  // A validation of a run's checkpoint keeps the run's own config.yaml: its --resume hint must go on training.
  if (!(valOnly && flags.resume)) await runDir.writeConfig(config);
  mkdirSync(path.dirname(runDir.logFile("worker")), { recursive: true });

  const stop = handleInterrupts("finishing the current phase and saving a checkpoint");

  const { startInferenceServer } = await import("../serve/index.js");
  const { WorkerClient } = await import("./worker/index.js");
  let engine: Awaited<ReturnType<typeof startInferenceServer>> | undefined;
  let worker: Awaited<ReturnType<typeof WorkerClient.start>> | undefined;
  let client: ReturnType<typeof makeClient> | undefined;
  const reporter = consoleReporter(totalSteps(config, trainPrompts.length), flags);
  if (startedOver) {
    reporter.note(`${runDir.root} has no checkpoint yet: ${valOnly ? "validating model.path" : "starting the run over from step 1"}`);
  }
  // Validating model.path needs the engine alone; the worker is there to load a checkpoint and push its weights.
  const needsWorker = !valOnly || resumeState !== undefined;
  const tensorboard = config.trainer.logger.includes("tensorboard")
    ? (await import("./tensorboard.js")).startTensorboard(
        path.join(runDir.root, "tensorboard"),
        `${config.trainer.project_name}/${config.trainer.experiment_name}`,
        (m) => reporter.note(m),
      )
    : undefined;
  try {
    // The engine and the worker each take seconds to start (imports, model loading): they start side by side.
    if (rollout.name === "embedded") reporter.note(`starting the embedded engine${needsWorker ? " and the training worker" : ""}...`);
    const startingEngine =
      rollout.name === "embedded"
        ? startInferenceServer({
            engine: "embedded",
            model: config.actor_rollout_ref.model.path,
            port: 0,
            logFile: runDir.logFile("engine"),
            signal: stop.signal,
          }).then((started) => (engine = started))
        : Promise.resolve(undefined);
    const workerLog = runDir.logFile("worker");
    const actor = config.actor_rollout_ref.actor;
    const startingWorker = !needsWorker ? Promise.resolve(undefined) : WorkerClient.start({
      nprocPerNode: config.trainer.n_gpus_per_node,
      ...(config.trainer.nnodes > 1 || config.trainer.torchrun_args.length
        ? { torchrunArgs: [`--nnodes=${config.trainer.nnodes}`, ...config.trainer.torchrun_args] }
        : {}),
      onLog: (line) => appendFileSync(workerLog, `${line}\n`),
    }).then(async (started) => {
      worker = started;
      await started.init({
        model_path: config.actor_rollout_ref.model.path,
        dtype: actor.fsdp_config.dtype,
        seed: config.trainer.seed,
        lr: actor.optim.lr,
        betas: actor.optim.betas,
        weight_decay: actor.optim.weight_decay,
        lr_warmup_steps: actor.optim.lr_warmup_steps,
        lr_warmup_steps_ratio: actor.optim.lr_warmup_steps_ratio,
        lr_scheduler_type: actor.optim.warmup_style ?? actor.optim.lr_scheduler_type,
        min_lr_ratio: actor.optim.min_lr_ratio,
        num_cycles: actor.optim.num_cycles,
        total_optimizer_steps: totalOptimizerSteps(config, trainPrompts.length),
        grad_clip: actor.grad_clip,
        reshard_after_forward: actor.fsdp_config.reshard_after_forward,
        use_ref: actor.use_kl_loss,
        gradient_checkpointing: config.actor_rollout_ref.model.enable_gradient_checkpointing,
        micro_batch_token_budget: actor.ppo_max_token_len_per_gpu,
        temperature: rollout.temperature,
        ppo_mini_batch_size: actor.ppo_mini_batch_size,
        ppo_epochs: actor.ppo_epochs,
        clip_ratio_low: actor.clip_ratio_low,
        clip_ratio_high: actor.clip_ratio_high,
        clip_ratio_c: actor.clip_ratio_c,
        loss_agg_mode: actor.loss_agg_mode,
        loss_scale_factor: actor.loss_scale_factor,
        max_response_length: config.data.max_response_length,
        use_kl_loss: actor.use_kl_loss,
        kl_loss_coef: actor.kl_loss_coef,
        kl_loss_type: actor.kl_loss_type,
        entropy_coeff: actor.entropy_coeff,
        adv_estimator: config.algorithm.adv_estimator,
        norm_adv_by_std_in_grpo: config.algorithm.norm_adv_by_std_in_grpo,
        rollout_is_threshold: config.algorithm.rollout_is_threshold,
      });
      return started;
    });
    // Both settle before either failure is thrown, so whichever did start is there for the cleanup below.
    const [engineStart, workerStart] = await Promise.allSettled([startingEngine, startingWorker]);
    if (engineStart.status === "rejected") throw engineStart.reason;
    if (workerStart.status === "rejected") throw workerStart.reason;
    const engineUrl = engineStart.value?.url;
    const serverRollout = engineUrl ? { ...rollout, server: { ...rollout.server, urls: [engineUrl] } } : rollout;
    client = makeClient(serverRollout, flags.apiKey ?? (await readApiKey(rollout.server.api_key_env)));
    const engineDied = engine?.exited.then((exit) => exit);
    const result = await Promise.race([
      trainLoop({
        config, runDir, resumeState, client, parts, worker: workerStart.value, trainPrompts, valPrompts, stop: stop.signal, reporter,
        ...(tensorboard ? { onMetrics: (record: Record<string, unknown>) => tensorboard.log(record) } : {}),
      }),
      ...(engineDied
        ? [
            engineDied.then((exit) => {
              if (exit.requested) return new Promise<never>(() => undefined);
              throw new AgentrlError(
                `the embedded engine exited (code ${exit.code ?? exit.signal}); its last lines:\n${engine!.logTail().slice(-15).join("\n")}`,
                { hint: `resume with: ${resumeHint} (log: ${runDir.logFile("engine")})` },
              );
            }),
          ]
        : []),
    ]);
    reporter.stop();
    const checkpoint = result.lastCheckpoint ? runDir.relative(result.lastCheckpoint) : "none";
    if (result.stopped) {
      process.stderr.write(`stopped after step ${result.lastStep}; checkpoint: ${checkpoint}\nresume with: ${resumeHint}\n`);
      throw new ExitError(130);
    }
    if (!flags.json) {
      const summary = valOnly
        ? `validated step ${result.lastStep} (trainer.val_only); metrics in ${runDir.metricsFile}`
        : `${result.lastStep} steps; run folder ${runDir.root} (checkpoint ${checkpoint})`;
      process.stdout.write(`${style.green("done")}: ${summary}\n`);
    }
  } catch (err) {
    writeLogTail(err);
    throw err;
  } finally {
    reporter.stop();
    stop.dispose();
    await worker?.shutdown().catch(() => worker?.kill());
    await client?.close().catch(() => undefined);
    await engine?.stop().catch(() => undefined);
    await parts.close();
    await tensorboard?.close();
  }
}
