/**
 * `agentrl train`: resolves the config, reads the inputs, prepares the run folder, starts the engine and the worker,
 * runs the loop, and shows it: a live status line on stderr (TTY only), one summary line per step, or one JSON
 * object per step with --json.
 */
import { InputError } from "../errors.js";
import { style } from "../term.js";
import { readApiKey, makeClient } from "../rollout/setup.js";
import type { RolloutSection } from "../rollout/config.js";
import { noteUnlessQuiet, resolveModelPath } from "../config/hub-model.js";
import { setPath } from "../config/tree.js";
import { trainConfigSchema, totalSteps, type TrainConfig } from "./config.js";
import { printTrainDryRun } from "./dry-run.js";
import { loadTrainInputs, type TrainInputs } from "./inputs.js";
import { trainLoop } from "./loop.js";
import { TrainingProcesses, type EngineSpec } from "./processes.js";
import { trainReporter } from "./reporter.js";
import { loraServerFlags } from "../serve/index.js";
import { repeatCommand, resumeCommand } from "./resume-hint.js";
import { runDirOf, type RunDir } from "./run-dir.js";
import { prepareRunFolder, resolveRunConfig, superviseRun, type PreparedRun, type RunFlags } from "./session.js";
import { startTrackers, type Trackers } from "./trackers.js";
import { grpoWorkerConfig } from "./worker-config.js";

/** The flags of `agentrl train` as commander parses them; src/cli/commands/train.ts declares them. */
export interface TrainFlags extends RunFlags {
  engine?: "embedded" | "sglang";
  server?: string[];
  colocate?: boolean;
  apiKey?: string;
}

export async function resolveTrainConfig(flags: TrainFlags): Promise<TrainConfig> {
  const config = await resolveRunConfig(trainConfigSchema, "train", flags, "pass --config FILE (see examples/ for ready ones)", (tree) => {
    if (flags.server?.length) {
      setPath(tree, "actor_rollout_ref.rollout.server.urls", flags.server);
      setPath(tree, "actor_rollout_ref.rollout.name", "sglang");
    }
    if (flags.engine) setPath(tree, "actor_rollout_ref.rollout.name", flags.engine);
    if (flags.colocate) setPath(tree, "trainer.colocate", true);
  });
  if (config.actor_rollout_ref.rollout.threads > 1) {
    // Train's rollouts share one client with the weight syncs (pause, load, continue): they stay in one thread.
    throw new InputError("actor_rollout_ref.rollout.threads is for agentrl rollout; agentrl train runs its rollouts in one thread", {
      hint: "remove the key (or set it to 1)",
    });
  }
  if (config.actor_rollout_ref.ref.model.path !== null && !config.actor_rollout_ref.actor.use_kl_loss) {
    // The reference exists for the KL loss alone: a path without it would load a model nothing reads.
    throw new InputError("actor_rollout_ref.ref.model.path is set but actor.use_kl_loss is false: nothing would read the reference", {
      hint: "set actor_rollout_ref.actor.use_kl_loss=true, or remove the key",
    });
  }
  const { mode } = config.async_training;
  if (mode !== "sync" && config.trainer.colocate) {
    // Colocated, the engine gives its memory to the update: nothing can generate while the trainer works.
    throw new InputError(`async_training.mode: ${mode} needs the engine on GPUs of its own; trainer.colocate is true`, {
      hint: "set async_training.mode=sync, or trainer.colocate=false (and drop --colocate)",
    });
  }
  if (mode !== "fully_async") {
    const async = config.async_training;
    // Only fully_async has groups of different ages generating at once, and only it can update between syncs: sync and
    // one_step_off generate whole batches on the weights of the step before.
    requireDefault("engine_priority", async.engine_priority, false, mode);
    requireDefault("trigger_parameter_sync_step", async.trigger_parameter_sync_step, 1, mode);
  }
  return config;
}

/** An async_training key that only fully_async reads must keep its default in `mode`. */
function requireDefault(key: string, value: unknown, off: unknown, mode: string): void {
  if (value === off) return;
  throw new InputError(`async_training.${key}: ${String(value)} needs async_training.mode fully_async; the mode is ${mode}`, {
    hint: `set async_training.mode=fully_async, or ${key}=${String(off)}`,
  });
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

export async function runTrainCommand(flags: TrainFlags): Promise<void> {
  const config = await resolveTrainConfig(flags);
  if (flags.dryRun) return printTrainDryRun(config, Boolean(flags.json));
  const model = config.actor_rollout_ref.model;
  model.path = await resolveModelPath(model.path, "actor_rollout_ref.model.path", noteUnlessQuiet(flags));
  const ref = config.actor_rollout_ref.ref.model;
  if (ref.path !== null) ref.path = await resolveModelPath(ref.path, "actor_rollout_ref.ref.model.path", noteUnlessQuiet(flags));
  const valOnly = config.trainer.val_only;
  const inputs = await loadTrainInputs(config, flags.config);
  const runDir = runDirOf(config);
  let trackers: Trackers | undefined;
  try {
    // A validation of a run's checkpoint keeps the run's own config.yaml (its --resume hint must go on training), and
    // its metric lines: validating trains nothing.
    const prepared = await prepareRunFolder(runDir, flags, config, { keepMetrics: valOnly, keepConfig: valOnly && Boolean(flags.resume) });
    const reporter = trainReporter(totalSteps(config, inputs.trainPrompts.length), flags);
    if (prepared.startedOver) {
      reporter.note(`${runDir.root} has no checkpoint yet: ${valOnly ? "validating model.path" : "starting the run over from step 1"}`);
    }
    trackers = await startTrackers(config, runDir, prepared, (message) => reporter.note(message));
    const processes = new TrainingProcesses();
    const resumeHint = trainResumeHint(config, flags, runDir);
    await superviseRun({
      stopping: "finishing the current phase and saving a checkpoint",
      reporter,
      processes,
      resumeHint,
      runDir,
      async run(stop) {
        await startProcesses(processes, config, runDir, prepared, inputs, stop, (message) => reporter.note(message));
        const rollout = config.actor_rollout_ref.rollout;
        const apiKey = flags.apiKey ?? (await readApiKey(rollout.server.api_key_env));
        const client = processes.adopt(makeClient(servedBy(rollout, processes.engine?.url), apiKey));
        const loop = trainLoop({
          config, runDir, resumeState: prepared.resumeState, client, parts: inputs.parts, worker: processes.worker,
          trainPrompts: inputs.trainPrompts, valPrompts: inputs.valPrompts, stop, reporter,
          onMetrics: trackers?.onMetrics, onValidation: trackers?.onValidation,
        });
        return Promise.race([loop, processes.engineDeath(`resume with: ${resumeHint} (log: ${runDir.logFile("engine")})`)]);
      },
      done(result, checkpoint) {
        if (flags.json) return;
        const summary = valOnly
          ? `validated step ${result.lastStep} (trainer.val_only); metrics in ${runDir.metricsFile}`
          : `${result.lastStep} steps; run folder ${runDir.root} (checkpoint ${checkpoint})`;
        process.stdout.write(`${style.green("done")}: ${summary}\n`);
      },
    });
  } finally {
    await inputs.parts.close();
    await trackers?.close();
  }
}

/**
 * The embedded engine (when the config names it) and the worker, side by side. Validating model.path needs the engine
 * alone; the worker is there to load a checkpoint and push its weights.
 */
async function startProcesses(
  processes: TrainingProcesses,
  config: TrainConfig,
  runDir: RunDir,
  prepared: PreparedRun,
  inputs: TrainInputs,
  signal: AbortSignal,
  note: (message: string) => void,
): Promise<void> {
  const embedded = config.actor_rollout_ref.rollout.name === "embedded";
  const needsWorker = !config.trainer.val_only || prepared.resumeState !== undefined;
  if (embedded) note(`starting the embedded engine${needsWorker ? " and the training worker" : ""}...`);
  await processes.start({
    signal,
    engine: embedded ? embeddedEngineSpec(config, runDir) : undefined,
    worker: needsWorker
      ? { trainer: config.trainer, logFile: runDir.logFile("worker"), init: grpoWorkerConfig(config, inputs.trainPrompts.length) }
      : undefined,
  });
}

/** The embedded engine agentrl train starts: it orders its queue by priority when the requests carry one. */
function embeddedEngineSpec(config: TrainConfig, runDir: RunDir): EngineSpec {
  const extraArgs = config.async_training.engine_priority ? ["--enable-priority-scheduling"] : [];
  const model = config.actor_rollout_ref.model;
  // LoRA without lora.merge: each sync loads the adapter (/load_lora_adapter), which needs --enable-lora.
  if (model.lora_rank > 0 && !model.lora.merge) {
    extraArgs.push(...loraServerFlags({ maxRank: model.lora_rank, targetModules: model.target_modules }));
  }
  return { model: config.actor_rollout_ref.model.path, logFile: runDir.logFile("engine"), extraArgs };
}

/** The rollout settings with the embedded engine's URL as the one server, when it runs. */
function servedBy(rollout: RolloutSection, engineUrl: string | undefined): RolloutSection {
  return engineUrl ? { ...rollout, server: { ...rollout.server, urls: [engineUrl] } } : rollout;
}

