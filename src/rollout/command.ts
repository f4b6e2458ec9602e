/**
 * `agentrl rollout`: merges config file, --set and flags, validates, then runs the rollout with live progress on
 * stderr and a closing summary (tables, or JSON with --json) on stdout.
 */
import { dump as dumpYaml } from "js-yaml";
import ora from "ora";
import { ExitError, UsageError } from "../errors.js";
import { checkOutputPath } from "../data/output-path.js";
import { readParquetInfo } from "../data/parquet.js";
import { checkTrajectoryOutput, openTrajectoryWriter } from "../data/trajectory-store.js";
import type { SglangClient } from "../engine/index.js";
import { rolloutConfigSchema, type RolloutConfig } from "./config.js";
import { runRollout } from "./run-rollout.js";
import { overSampleTarget } from "./over-sample.js";
import { countPrompts, readPrompts } from "./sample.js";
import { loadRolloutParts, makeClient, readApiKey, trajectoryContext } from "./setup.js";
import type { RolloutSummary } from "./stats.js";
import type { RolloutFlags } from "../cli/commands/rollout.js";
import { applySets, readYamlConfig, setPath, validateConfig, type ConfigTree } from "../config/tree.js";
import { handleInterrupts } from "../interrupt.js";
import { formatDuration, makeTable, style } from "../term.js";

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
    [`${rollout}.temperature`, flags.temperature],
    [`${rollout}.seed`, flags.seed],
    [`${rollout}.over_sample_rate`, flags.overSampleRate],
    ["custom_reward_function.path", flags.reward],
    ["custom_reward_function.name", flags.rewardName],
    ["output.path", flags.out],
  ];
  for (const [key, value] of fromFlags) if (value !== undefined) setPath(tree, key, value);
  return validateConfig(rolloutConfigSchema, tree, flags.config ?? "rollout config");
}

function requireSet(value: string | null, what: string, flag: string): string {
  if (!value) throw new UsageError(`no ${what} given`, { hint: `pass ${flag}` });
  return value;
}

interface Implications {
  prompts: number | null;
  trajectories: number | null;
  requestsInFlight: number | null;
  tokenBudgetPerTrajectory: number;
}

async function implicationsOf(config: RolloutConfig): Promise<Implications> {
  const rollout = config.actor_rollout_ref.rollout;
  let prompts: number | null = null;
  if (config.data.path) {
    try {
      prompts = (await readParquetInfo(config.data.path)).numRows;
      if (config.data.limit) prompts = Math.min(prompts, config.data.limit);
    } catch {
      prompts = null;
    }
  }
  const trajectories = prompts === null ? null : prompts * rollout.n;
  return {
    prompts,
    trajectories,
    requestsInFlight: trajectories === null ? rollout.max_concurrency : Math.min(rollout.max_concurrency, trajectories),
    tokenBudgetPerTrajectory: config.data.max_prompt_length + config.data.max_response_length,
  };
}

function printDryRun(config: RolloutConfig, implied: Implications, json: boolean): void {
  const rollout = config.actor_rollout_ref.rollout;
  if (json) {
    process.stdout.write(`${JSON.stringify({ config, implied }, null, 2)}\n`);
    return;
  }
  process.stdout.write(`# effective config\n${dumpYaml(config, { lineWidth: 120 })}\n`);
  const mt = rollout.multi_turn;
  const lines = [
    `prompts: ${implied.prompts ?? "unknown (no readable data.path)"}`,
    `trajectories: ${implied.trajectories ?? "?"} (${rollout.n} per prompt)`,
    `requests in flight: at most ${implied.requestsInFlight} (one per trajectory in flight, spread over ${rollout.server.urls.length || "no"} server(s))`,
    `token budget per trajectory: ${config.data.max_prompt_length} prompt + ${config.data.max_response_length} response = ${implied.tokenBudgetPerTrajectory}; each turn may generate what is left of the response budget`,
    `turns: ${mt.max_assistant_turns ?? "unlimited"} assistant, ${mt.max_user_turns ?? "unlimited"} tool/user; ${mt.max_parallel_calls} tool call(s) executed per turn`,
    `deadlines: ${rollout.server.timeout}s per request, ${mt.tool_timeout}s per tool call, ${rollout.trajectory_timeout}s per trajectory; ${rollout.server.max_attempts} tries per request`,
    rollout.over_sample_rate > 0
      ? `over-sampling: once ${implied.trajectories === null ? `${((1 - rollout.over_sample_rate) * 100).toFixed(0)}%` : overSampleTarget(implied.trajectories, rollout.over_sample_rate)} of the trajectories have finished, the rest are aborted (finish_reason over_sample)`
      : "over-sampling: off (every trajectory runs to its end)",
  ];
  process.stdout.write(`# what it implies\n${lines.map((l) => `- ${l}`).join("\n")}\n`);
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

export interface SummaryExtras {
  wallMs: number;
  out: string;
  /** With --resume: trajectories kept from the file (failed ones among them with --keep-failed), failed ones redone. */
  resumed?: { kept: number; failedKept: number; failedRedone: number };
  skippedPrompts: number;
  overSampleAborted: number;
  overSampleNotStarted: number;
  /** The engine client's adaptive concurrency: shown only when overload made it cut the limit. */
  concurrency?: { max: number; lowest: number; decreases: number };
}

function resumedLine(resumed: NonNullable<SummaryExtras["resumed"]>): string {
  const failed = resumed.failedKept
    ? `, ${resumed.failedKept} of them failed and kept (--keep-failed)`
    : `; ${resumed.failedRedone} failed trajectories redone`;
  return `resumed: ${resumed.kept} trajectories kept from the file${failed}`;
}

export function printRolloutSummary(summary: RolloutSummary, extra: SummaryExtras): void {
  const main = makeTable(["trajectories", "reward mean ± std", "accuracy", "tool calls / traj", "tool-call rate", "parse errors", "tool errors", "drift", "empty mask"]);
  main.push([
    summary.count,
    `${summary.reward.mean.toFixed(3)} ± ${summary.reward.std.toFixed(3)}`,
    pct(summary.accuracy),
    summary.toolCallsPerTrajectory.toFixed(2),
    pct(summary.toolCallRate),
    pct(summary.parseErrorRate),
    pct(summary.toolErrorRate),
    summary.driftCount,
    summary.emptyMaskCount,
  ]);
  process.stdout.write(`${main.toString()}\n`);
  const statusTable = makeTable(["status", "count"]);
  for (const [status, count] of Object.entries(summary.byStatus)) statusTable.push([status, count]);
  const finishTable = makeTable(["finish reason", "count"]);
  for (const [reason, count] of Object.entries(summary.finishReasons).sort((a, b) => b[1] - a[1])) finishTable.push([reason, count]);
  const turnsTable = makeTable(["assistant turns", "trajectories"]);
  for (const [turns, count] of Object.entries(summary.turnsHistogram).sort((a, b) => Number(a[0]) - Number(b[0]))) turnsTable.push([turns, count]);
  process.stdout.write(`${statusTable.toString()}\n${finishTable.toString()}\n${turnsTable.toString()}\n`);
  const seconds = extra.wallMs / 1000;
  process.stdout.write(
    `throughput: ${(summary.count / Math.max(seconds, 1e-9)).toFixed(2)} trajectories/s, ` +
      `${Math.round(summary.sampledTokens / Math.max(seconds, 1e-9))} sampled tokens/s over ${formatDuration(extra.wallMs)}; ` +
      `${summary.retries} request retries` +
      (extra.skippedPrompts ? `; ${extra.skippedPrompts} prompt(s) skipped as too long` : "") +
      (extra.overSampleAborted || extra.overSampleNotStarted
        ? `\nover-sampling: ${extra.overSampleAborted} trajectories aborted (finish_reason over_sample)` +
          (extra.overSampleNotStarted ? `, ${extra.overSampleNotStarted} samples not started (not in the file; --resume runs them)` : "")
        : "") +
      (extra.resumed ? `\n${resumedLine(extra.resumed)}` : "") +
      (extra.concurrency?.decreases
        ? `\nserver overload (timeouts while slow, 429, 503): requests in flight cut ${extra.concurrency.decreases} time(s), ` +
          `lowest ${extra.concurrency.lowest} of ${extra.concurrency.max} (actor_rollout_ref.rollout.server.adaptive_concurrency)`
        : "") +
      `\ntrajectories: ${extra.out}\n`,
  );
}

export async function runRolloutCommand(flags: RolloutFlags): Promise<void> {
  const config = await resolveRolloutConfig(flags);
  if (flags.dryRun) {
    printDryRun(config, await implicationsOf(config), Boolean(flags.json));
    return;
  }
  const dataPath = requireSet(config.data.path, "dataset", "--data FILE (or data.path)");
  const modelPath = requireSet(config.actor_rollout_ref.model.path, "model folder", "--model DIR (or actor_rollout_ref.model.path)");
  let rollout = config.actor_rollout_ref.rollout;
  if (flags.engine === "embedded" && rollout.server.urls.length) throw new UsageError("--engine embedded and --server exclude each other");
  if (flags.keepFailed && !flags.resume) throw new UsageError("--keep-failed needs --resume", { hint: "add --resume to continue the --out file" });
  // Inputs before outputs: a missing, empty or wrong-schema dataset, or an output that would be refused, fails here,
  // before any server starts and before the output file exists (an empty leftover would block the corrected re-run).
  const writerOptions = {
    resume: Boolean(flags.resume),
    keepFailed: Boolean(flags.keepFailed),
    force: Boolean(flags.force),
    rowGroupSize: config.output.row_group_size,
  };
  await checkOutputPath(config.output.path, "file");
  await checkTrajectoryOutput(config.output.path, writerOptions);
  const prompts = await countPrompts(dataPath, config.data.limit);
  const apiKey = flags.apiKey ?? (await readApiKey(rollout.server.api_key_env));

  // Ctrl-C is handled from here until the file is closed: during start-up it cancels the run before it starts, during
  // the final merge it lets the merge finish. Either way the output stays resumable and the user is told how.
  const interrupt = handleInterrupts("finishing the file, which --resume can continue");

  const spinner = ora({ stream: process.stderr, isSilent: Boolean(flags.quiet) || !process.stderr.isTTY });
  // Without a terminal (a log file, nohup, CI) the spinner is silent: a line per tenth of the run shows progress
  // instead. --json keeps stderr quiet for scripts.
  const progressLines = !flags.quiet && !flags.json && !process.stderr.isTTY;
  let nextTenth = 1;
  const cleanups: Array<() => Promise<unknown>> = [];
  let started = performance.now();
  let already = 0;
  let resumedFailed = { redone: 0, kept: 0 };
  let client: SglangClient | undefined;
  let result;
  try {
    // The tokenizer, tools and reward module load in a second: a bad one fails before the embedded engine starts.
    const reward = config.custom_reward_function;
    const parts = await loadRolloutParts({
      modelPath,
      rollout,
      rewardModulePath: reward.path,
      rewardName: reward.name,
      rewardKwargs: reward.reward_kwargs,
    });
    cleanups.unshift(() => parts.close());
    if (flags.engine === "embedded") {
      const { startEngine } = await import("../serve/index.js");
      if (!flags.quiet) process.stderr.write(`starting the embedded engine on ${modelPath}...\n`);
      const engine = await startEngine({ engine: "embedded", model: modelPath, port: 0 });
      cleanups.unshift(() => engine.stop());
      rollout = { ...rollout, server: { ...rollout.server, urls: [engine.url] } };
    }
    const engineClient = makeClient(rollout, apiKey);
    client = engineClient;
    cleanups.unshift(() => engineClient.close());
    const writer = await openTrajectoryWriter(config.output.path, writerOptions);
    // Finish the file even on failure: everything written so far stays readable and resumable.
    cleanups.unshift(() => writer.close().catch(() => undefined));
    const total = prompts * rollout.n;

    started = performance.now();
    let inFlight = 0;
    already = writer.existingIds.size;
    resumedFailed = { redone: writer.removedFailed, kept: writer.keptFailed };
    spinner.start(
      `starting ${total - already} trajectories (${already} already done` +
        (resumedFailed.redone ? `, ${resumedFailed.redone} failed ones redone` : "") +
        ")",
    );
    result = await runRollout({
      prompts: readPrompts(dataPath, config.data.limit),
      n: rollout.n,
      concurrency: rollout.max_concurrency,
      context: trajectoryContext(parts, engineClient, rollout, {
        maxPromptLength: config.data.max_prompt_length,
        maxResponseLength: config.data.max_response_length,
      }),
      signal: interrupt.signal,
      writer,
      skipIds: writer.existingIds,
      filterOverlongPrompts: config.data.filter_overlong_prompts,
      overSample: { rate: rollout.over_sample_rate, total: total - already },
      onStart: () => {
        inFlight += 1;
      },
      onTrajectory: (_t, stats) => {
        inFlight -= 1;
        const s = stats.summary();
        const seconds = (performance.now() - started) / 1000;
        const failed = s.byStatus.failed ?? 0;
        spinner.text =
          `${already + s.count}/${total} done | reward ${s.reward.mean.toFixed(3)} | acc ${pct(s.accuracy)} | ` +
          `tool calls/traj ${s.toolCallsPerTrajectory.toFixed(2)} | errors ${failed} failed, ${pct(s.toolErrorRate)} tool | ` +
          `${Math.round(s.sampledTokens / Math.max(seconds, 1e-9))} tok/s | in flight ${inFlight}`;
        const todo = total - already;
        if (progressLines && todo > 0 && s.count * 10 >= nextTenth * todo) {
          process.stderr.write(`${spinner.text}\n`);
          nextTenth = Math.floor((s.count * 10) / todo) + 1;
        }
      },
    });
  } finally {
    spinner.stop();
    for (const cleanup of cleanups) await cleanup();
    interrupt.dispose();
  }
  const wallMs = performance.now() - started;
  const summary = result.stats.summary();
  const engineStats = client!.stats();
  if (flags.json) {
    process.stdout.write(
      `${JSON.stringify({ summary, out: config.output.path, wall_ms: wallMs, resumed: already, redone_failed: resumedFailed.redone, kept_failed: resumedFailed.kept, skipped_prompts: result.skippedPrompts, cancelled: result.cancelled, cancelled_in_flight: result.cancelledInFlight, over_sample_aborted: result.overSampleAborted, over_sample_not_started: result.overSampleNotStarted, engine: engineStats }, null, 2)}\n`,
    );
  } else {
    printRolloutSummary(summary, {
      wallMs,
      out: config.output.path,
      resumed: flags.resume ? { kept: already, failedKept: resumedFailed.kept, failedRedone: resumedFailed.redone } : undefined,
      skippedPrompts: result.skippedPrompts,
      overSampleAborted: result.overSampleAborted,
      overSampleNotStarted: result.overSampleNotStarted,
      concurrency: { max: config.actor_rollout_ref.rollout.max_concurrency, ...engineStats.concurrency },
    });
  }
  if (result.cancelled) {
    process.stderr.write(style.yellow(`cancelled: ${result.cancelledInFlight} trajectories in flight were dropped; run again with --resume to finish\n`));
    throw new ExitError(130);
  }
  if (interrupt.signal.aborted) {
    // Ctrl-C came while the file was being closed: the close finished, nothing is missing.
    process.stderr.write(style.yellow("interrupted while closing the file: it is complete (--resume has nothing left to do)\n"));
    throw new ExitError(130);
  }
  const failed = summary.byStatus.failed ?? 0;
  if (failed > 0) {
    throw new ExitError(1, `${failed} of ${summary.count} trajectories failed (see their error field: agentrl inspect ${config.output.path} --where status=failed)`);
  }
}
