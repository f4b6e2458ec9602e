/**
 * `agentrl rollout`: resolves the config (file, --set, flags), checks every input before it creates any output,
 * opens the parts, the engine and the output file, runs the rollout with live progress on stderr, and reports a
 * closing summary (tables, or JSON with --json) on stdout. What it prints is in report.ts.
 */
import { customChatTemplate } from "../chat/index.js";
import { ExitError, UsageError } from "../errors.js";
import { checkOutputPath } from "../data/output-path.js";
import { checkTrajectoryOutput, openTrajectoryWriter, type OpenOptions, type TrajectoryWriter } from "../data/trajectory-store.js";
import type { EngineStats } from "../engine/index.js";
import { rolloutConfigSchema, type RolloutConfig, type RolloutSection } from "./config.js";
import { inThisThread, runRollout, type RolloutResult, type TrajectoryExecutor } from "./run-rollout.js";
import { RolloutThreads } from "./threads/rollout-threads.js";
import { countPrompts, readPrompts } from "./sample.js";
import { agentLoopNames, checkAgentName } from "./agent-loops.js";
import { loadRolloutParts, makeClient, readApiKey, trajectoryContext, type RolloutParts } from "./setup.js";
import { checkPromptLengths } from "./prompt-lengths.js";
import type { RolloutSummary } from "./stats.js";
import { implicationsOf, printDryRun, printJsonReport, printRolloutSummary, RolloutProgress } from "./report.js";
import { noteUnlessQuiet, resolveModelPath } from "../config/hub-model.js";
import { applySets, readYamlConfig, setPath, validateConfig, type ConfigTree } from "../config/tree.js";
import { handleInterrupts } from "../interrupt.js";
import { style } from "../term.js";

/** The flags of `agentrl rollout` as commander parses them; src/cli/commands/rollout.ts declares them. */
export interface RolloutFlags {
  config?: string;
  data?: string;
  model?: string;
  server?: string[];
  tools?: string;
  interaction?: string;
  n?: number;
  concurrency?: number;
  threads?: number;
  limit?: number;
  out?: string;
  format?: string;
  temperature?: number;
  maxTurns?: number;
  reward?: string;
  rewardName?: string;
  seed?: number;
  overSampleRate?: number;
  set?: string[];
  apiKey?: string;
  engine?: "embedded" | "sglang";
  resume?: boolean;
  keepFailed?: boolean;
  force?: boolean;
  dryRun?: boolean;
  json?: boolean;
  quiet?: boolean;
}

/** The effective config: file, then --set, then flags (flags win). */
export async function resolveRolloutConfig(flags: RolloutFlags): Promise<RolloutConfig> {
  const tree: ConfigTree = flags.config ? await readYamlConfig(flags.config) : {};
  applySets(tree, flags.set ?? []);
  const rollout = "actor_rollout_ref.rollout";
  const fromFlags: Array<[string, unknown]> = [
    ["data.path", flags.data],
    ["data.limit", flags.limit],
    ["actor_rollout_ref.model.path", flags.model],
    [`${rollout}.server.urls`, flags.server],
    [`${rollout}.multi_turn.tool_config_path`, flags.tools],
    [`${rollout}.multi_turn.interaction_config_path`, flags.interaction],
    [`${rollout}.multi_turn.format`, flags.format],
    [`${rollout}.multi_turn.max_assistant_turns`, flags.maxTurns],
    [`${rollout}.n`, flags.n],
    [`${rollout}.max_concurrency`, flags.concurrency],
    [`${rollout}.threads`, flags.threads],
    [`${rollout}.temperature`, flags.temperature],
    [`${rollout}.seed`, flags.seed],
    [`${rollout}.over_sample_rate`, flags.overSampleRate],
    ["custom_reward_function.path", flags.reward],
    ["custom_reward_function.name", flags.rewardName],
    ["output.path", flags.out],
  ];
  for (const [key, value] of fromFlags) if (value !== undefined) setPath(tree, key, value);
  return validateConfig(rolloutConfigSchema, "rollout", tree, flags.config ?? "rollout config");
}

function requireSet(value: string | null, what: string, flag: string): string {
  if (!value) throw new UsageError(`no ${what} given`, { hint: `pass ${flag}` });
  return value;
}

export async function runRolloutCommand(flags: RolloutFlags): Promise<void> {
  const config = await resolveRolloutConfig(flags);
  if (flags.dryRun) {
    printDryRun(config, await implicationsOf(config), Boolean(flags.json));
    return;
  }
  const inputs = await checkInputs(config, flags);
  // Ctrl-C is handled from here until the file is closed: during start-up it cancels the run before it starts, during
  // the final merge it lets the merge finish. Either way the output stays resumable and the user is told how.
  const interrupt = handleInterrupts("finishing the file, which --resume can continue");
  const cleanups: Cleanup[] = [];
  let outcome: RolloutOutcome;
  try {
    const opened = await openRollout(config, flags, inputs, cleanups);
    outcome = await runWithProgress(config, flags, opened, interrupt.signal, cleanups);
  } finally {
    for (const cleanup of cleanups) await cleanup();
    interrupt.dispose();
  }
  const summary = reportRollout(config, flags, outcome);
  exitIfIncomplete(config, outcome.result, summary, interrupt.signal);
}

/** What the command checked before it created anything. */
interface RolloutInputs {
  dataPath: string;
  modelPath: string;
  /** Dataset rows the run uses. */
  prompts: number;
  apiKey: string | undefined;
  writerOptions: OpenOptions;
}

/**
 * Inputs before outputs: a missing, empty or wrong-schema dataset, or an output that would be refused, fails here,
 * before any server starts and before the output file exists (an empty leftover would block the corrected re-run).
 */
async function checkInputs(config: RolloutConfig, flags: RolloutFlags): Promise<RolloutInputs> {
  const dataPath = requireSet(config.data.path, "dataset", "--data FILE (or data.path)");
  const modelSpec = requireSet(config.actor_rollout_ref.model.path, "model folder", "--model DIR (or actor_rollout_ref.model.path)");
  const modelPath = await resolveModelPath(modelSpec, flags.model ? "--model" : "actor_rollout_ref.model.path", noteUnlessQuiet(flags));
  const rollout = config.actor_rollout_ref.rollout;
  if (flags.engine === "embedded" && rollout.server.urls.length) throw new UsageError("--engine embedded and --server exclude each other");
  if (flags.keepFailed && !flags.resume) throw new UsageError("--keep-failed needs --resume", { hint: "add --resume to continue the --out file" });
  const writerOptions = {
    resume: Boolean(flags.resume),
    keepFailed: Boolean(flags.keepFailed),
    force: Boolean(flags.force),
    rowGroupSize: config.output.row_group_size,
    sampleOrder: config.output.order === "sample",
  };
  await checkOutputPath(config.output.path, "file");
  await checkTrajectoryOutput(config.output.path, writerOptions);
  // A row's agent_name must name a registered loop: checked on the names, before any module loads or output exists.
  const loopNames = await agentLoopNames(rollout.agent);
  const prompts = await countPrompts(dataPath, config.data.limit, (prompt) =>
    checkAgentName(prompt.row.agent_name, loopNames, `${dataPath}: row ${prompt.dataIndex}`),
  );
  const apiKey = flags.apiKey ?? (await readApiKey(rollout.server.api_key_env));
  return { dataPath, modelPath, prompts, apiKey, writerOptions };
}

/** Closes one thing the run opened; run newest first, on success and failure alike. */
type Cleanup = () => unknown;

interface OpenedRollout {
  inputs: RolloutInputs;
  trajectories: TrajectoryRunner;
  writer: TrajectoryWriter;
  /** The rollout section, pointed at the embedded engine when there is one. */
  rollout: RolloutSection;
}

/** Where the trajectories run (this thread, or worker threads), and the engine counters of the client(s) they use. */
interface TrajectoryRunner {
  executor: TrajectoryExecutor;
  engineStats(): EngineStats;
}

/** Loads the parts, starts the embedded engine if asked, and opens the client and the output file. */
async function openRollout(config: RolloutConfig, flags: RolloutFlags, inputs: RolloutInputs, cleanups: Cleanup[]): Promise<OpenedRollout> {
  const reward = config.custom_reward_function;
  const partsOptions = {
    modelPath: inputs.modelPath,
    rollout: config.actor_rollout_ref.rollout,
    rewardModulePath: reward.path,
    rewardName: reward.name,
    rewardKwargs: reward.reward_kwargs,
    ...(reward.python ? { rewardPython: reward.python } : {}),
    templateKwargs: config.data.apply_chat_template_kwargs,
    chatTemplate: await customChatTemplate(config.actor_rollout_ref.model, "actor_rollout_ref.model"),
  };
  const lengths = { maxPromptLength: config.data.max_prompt_length, maxResponseLength: config.data.max_response_length };
  const startEngine = (rollout: RolloutSection) =>
    flags.engine === "embedded" ? startEmbeddedEngine(rollout, inputs.modelPath, Boolean(flags.quiet), cleanups) : Promise.resolve(rollout);
  let rollout = config.actor_rollout_ref.rollout;
  let trajectories: TrajectoryRunner;
  if (rollout.threads > 1) {
    // Each thread loads its own parts and client (threads/worker.ts); they need the final server URLs, so the
    // embedded engine starts first here, and a bad tool or reward module fails after it, not before.
    if (!config.data.filter_overlong_prompts) {
      // The threads load their own parts; the check needs the tokenizer and tool schemas here, once.
      const parts = await loadRolloutParts(partsOptions);
      try {
        await checkPromptLengths(promptCheck(config, inputs, parts));
      } finally {
        await parts.close();
      }
    }
    rollout = await startEngine(rollout);
    const threads = await RolloutThreads.start(rollout.threads, rollout.max_concurrency, {
      parts: partsOptions,
      rollout,
      apiKey: inputs.apiKey,
      lengths,
      step: null,
    });
    cleanups.unshift(() => threads.close());
    trajectories = { executor: threads.executor, engineStats: () => threads.engineStats() };
  } else {
    // The tokenizer, tools and reward module load in a second: a bad one fails before the embedded engine starts.
    const parts = await loadRolloutParts(partsOptions);
    cleanups.unshift(() => parts.close());
    if (!config.data.filter_overlong_prompts) await checkPromptLengths(promptCheck(config, inputs, parts));
    rollout = await startEngine(rollout);
    const client = makeClient(rollout, inputs.apiKey);
    cleanups.unshift(() => client.close());
    trajectories = { executor: inThisThread(trajectoryContext(parts, client, rollout, lengths)), engineStats: () => client.stats() };
  }
  const writer = await openTrajectoryWriter(config.output.path, inputs.writerOptions);
  // Finish the file even on failure: everything written so far stays readable and resumable.
  cleanups.unshift(() => writer.close().catch(() => undefined));
  return { inputs, trajectories, writer, rollout };
}

/** What checkPromptLengths reads: the rows the run uses, rendered as the built-in loops render them. */
function promptCheck(config: RolloutConfig, inputs: RolloutInputs, parts: RolloutParts) {
  return {
    dataPath: inputs.dataPath,
    limit: config.data.limit,
    model: parts.model,
    toolSchemas: parts.toolSchemas,
    maxPromptLength: config.data.max_prompt_length,
    agent: config.actor_rollout_ref.rollout.agent,
  };
}

/** Starts agentrl's embedded engine on the model; the rollout section it returns points at it. */
async function startEmbeddedEngine(rollout: RolloutSection, modelPath: string, quiet: boolean, cleanups: Cleanup[]): Promise<RolloutSection> {
  const { startInferenceServer } = await import("../serve/index.js");
  if (!quiet) process.stderr.write(`starting the embedded engine on ${modelPath}...\n`);
  const engine = await startInferenceServer({ engine: "embedded", model: modelPath, port: 0 });
  cleanups.unshift(() => engine.stop());
  return { ...rollout, server: { ...rollout.server, urls: [engine.url] } };
}

interface RolloutOutcome {
  result: RolloutResult;
  trajectories: TrajectoryRunner;
  /** When the trajectories started (performance.now()). */
  started: number;
  /** Trajectories already in the file (--resume). */
  already: number;
  resumedFailed: { redone: number; kept: number };
}

async function runWithProgress(
  config: RolloutConfig,
  flags: RolloutFlags,
  opened: OpenedRollout,
  signal: AbortSignal,
  cleanups: Cleanup[],
): Promise<RolloutOutcome> {
  const { inputs, trajectories, writer, rollout } = opened;
  const total = inputs.prompts * rollout.n;
  const already = writer.existingIds.size;
  const resumedFailed = { redone: writer.removedFailed, kept: writer.keptFailed };
  const started = performance.now();
  const progress = new RolloutProgress(flags, { total, already, started });
  cleanups.unshift(() => progress.stop());
  progress.start(resumedFailed.redone);
  const result = await runRollout({
    prompts: readPrompts(inputs.dataPath, config.data.limit),
    n: rollout.n,
    concurrency: rollout.max_concurrency,
    executor: trajectories.executor,
    signal,
    writer,
    skipIds: writer.existingIds,
    filterOverlongPrompts: config.data.filter_overlong_prompts,
    overSample: { rate: rollout.over_sample_rate, total: total - already },
    onStart: () => progress.trajectoryStarted(),
    onTrajectory: (_trajectory, stats) => progress.trajectoryFinished(stats),
  });
  return { result, trajectories, started, already, resumedFailed };
}

/** Prints the closing summary (JSON with --json); the wall time includes closing the file. */
function reportRollout(config: RolloutConfig, flags: RolloutFlags, outcome: RolloutOutcome): RolloutSummary {
  const { result, already, resumedFailed } = outcome;
  const wallMs = performance.now() - outcome.started;
  const summary = result.stats.summary();
  const engineStats = outcome.trajectories.engineStats();
  if (flags.json) {
    printJsonReport(summary, result, {
      out: config.output.path,
      wallMs,
      resumed: already,
      failedRedone: resumedFailed.redone,
      failedKept: resumedFailed.kept,
      engine: engineStats,
    });
    return summary;
  }
  printRolloutSummary(summary, {
    wallMs,
    out: config.output.path,
    resumed: flags.resume ? { kept: already, failedKept: resumedFailed.kept, failedRedone: resumedFailed.redone } : undefined,
    skippedPrompts: result.skippedPrompts,
    overSampleAborted: result.overSampleAborted,
    overSampleNotStarted: result.overSampleNotStarted,
    concurrency: { max: config.actor_rollout_ref.rollout.max_concurrency, ...engineStats.concurrency },
  });
  return summary;
}

/** Exit 130 after Ctrl-C (saying how to finish), 1 when any trajectory failed. */
function exitIfIncomplete(config: RolloutConfig, result: RolloutResult, summary: RolloutSummary, interrupt: AbortSignal): void {
  if (result.cancelled) {
    process.stderr.write(style.yellow(`cancelled: ${result.cancelledInFlight} trajectories in flight were dropped; run again with --resume to finish\n`));
    throw new ExitError(130);
  }
  if (interrupt.aborted) {
    // Ctrl-C came while the file was being closed: the close finished, nothing is missing.
    process.stderr.write(style.yellow("interrupted while closing the file: it is complete (--resume has nothing left to do)\n"));
    throw new ExitError(130);
  }
  const failed = summary.byStatus.failed ?? 0;
  if (failed > 0) {
    throw new ExitError(1, `${failed} of ${summary.count} trajectories failed (see their error field: agentrl inspect ${config.output.path} --where status=failed)`);
  }
}
