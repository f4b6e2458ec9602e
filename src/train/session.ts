/**
 * What `agentrl train` and `agentrl sft` do around their loops, written once: the config with its flags, the run
 * folder, and the run's frame: Ctrl-C asks the loop to stop at its next safe point, a stopped run says where it
 * stopped and how to resume (exit 130), a failure shows the failing process's last lines, and whatever happens the
 * status line stops, the Ctrl-C handler goes and the processes stop.
 */
import type { z } from "zod";
import { ExitError, UsageError } from "../errors.js";
import { applySets, readYamlConfig, setPath, validateConfig, type ConfigTree } from "../config/tree.js";
import type { VerlCommand } from "../config/verl-keys.js";
import { handleInterrupts } from "../interrupt.js";
import { writeLogTail } from "../term.js";
import type { RunOutcome } from "./checkpoint.js";
import type { TrainingProcesses } from "./processes.js";
import type { RunDir, RunState } from "./run-dir.js";

/** The flags both commands read their config from. */
export interface ConfigFlags {
  config?: string;
  set?: string[];
  steps?: number;
  name?: string;
}

/** The flags every run command (`agentrl sft`, `agentrl train`) has: its config, then how the run folder is used. */
export interface RunFlags extends ConfigFlags {
  resume?: boolean;
  force?: boolean;
  dryRun?: boolean;
  json?: boolean;
  quiet?: boolean;
}

/**
 * The config file, its --set overrides, the command's own flags (`apply`), then --steps and --name; validated against
 * the command's schema.
 */
export async function resolveRunConfig<S extends z.ZodType>(
  schema: S,
  command: VerlCommand,
  flags: ConfigFlags,
  /** Where ready configs are, for the error without --config. */
  hint: string,
  apply: (tree: ConfigTree) => void = () => undefined,
): Promise<z.infer<S>> {
  if (!flags.config) throw new UsageError("no config given", { hint });
  const tree: ConfigTree = await readYamlConfig(flags.config);
  applySets(tree, flags.set ?? []);
  apply(tree);
  if (flags.steps) setPath(tree, "trainer.total_training_steps", flags.steps);
  if (flags.name) setPath(tree, "trainer.experiment_name", flags.name);
  return validateConfig(schema, command, tree, flags.config);
}

export interface PreparedRun {
  /** The state --resume continues from; undefined for a new run. */
  resumeState: RunState | undefined;
  /** --resume found no checkpoint: the run starts over from step 1. */
  startedOver: boolean;
}

/**
 * Makes the run folder (or checks the one to resume) and writes the run's config.yaml. A run stopped before its first
 * checkpoint left nothing to continue from: --resume starts it over (verl's resume_mode auto) and drops its metric
 * lines, so each step is logged once, unless `keepMetrics`.
 */
export async function prepareRunFolder(
  runDir: RunDir,
  flags: { resume?: boolean; force?: boolean },
  config: unknown,
  options: { keepMetrics?: boolean; keepConfig?: boolean } = {},
): Promise<PreparedRun> {
  const resumeState = await runDir.prepare({ resume: Boolean(flags.resume), force: Boolean(flags.force) });
  const startedOver = Boolean(flags.resume) && !resumeState;
  if (startedOver && !options.keepMetrics) runDir.truncateMetricsAfter(-1);
  if (!options.keepConfig) await runDir.writeConfig(config);
  return { resumeState, startedOver };
}

export interface RunFrame<R extends RunOutcome> {
  /** Completes "stopping: ..." on the first Ctrl-C. */
  stopping: string;
  reporter: { stop(): void };
  processes: TrainingProcesses;
  /** The command that continues the run, printed after Ctrl-C. */
  resumeHint: string;
  runDir: RunDir;
  /** Starts the processes and runs the loop; `stop` is aborted by Ctrl-C. */
  run(stop: AbortSignal): Promise<R>;
  /** Prints the end of a run that finished; `checkpoint` is its last, relative to the run folder, or "none". */
  done(result: R, checkpoint: string): void;
}

export async function superviseRun<R extends RunOutcome>(frame: RunFrame<R>): Promise<void> {
  const stop = handleInterrupts(frame.stopping);
  try {
    const result = await frame.run(stop.signal);
    frame.reporter.stop();
    const checkpoint = result.lastCheckpoint ? frame.runDir.relative(result.lastCheckpoint) : "none";
    if (result.stopped) {
      process.stderr.write(`stopped after step ${result.lastStep}; checkpoint: ${checkpoint}\nresume with: ${frame.resumeHint}\n`);
      throw new ExitError(130);
    }
    frame.done(result, checkpoint);
  } catch (err) {
    writeLogTail(err);
    throw err;
  } finally {
    frame.reporter.stop();
    stop.dispose();
    await frame.processes.stop();
  }
}
