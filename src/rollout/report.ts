/**
 * What `agentrl rollout` prints: the --dry-run view of a config, live progress on stderr while it runs, and the
 * closing summary (tables, or JSON with --json) on stdout.
 */
import { dump as dumpYaml } from "js-yaml";
import ora, { type Ora } from "ora";
import { readParquetInfo } from "../data/parquet.js";
import type { EngineStats } from "../engine/index.js";
import type { RolloutConfig } from "./config.js";
import { overSampleTarget } from "./over-sample.js";
import type { RolloutResult } from "./run-rollout.js";
import type { RolloutStats, RolloutSummary } from "./stats.js";
import { formatDuration, makeTable } from "../term.js";

export interface Implications {
  prompts: number | null;
  trajectories: number | null;
  requestsInFlight: number | null;
  tokenBudgetPerTrajectory: number;
}

/** What a config implies, for --dry-run: counts, concurrency and token budgets. */
export async function implicationsOf(config: RolloutConfig): Promise<Implications> {
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

export function printDryRun(config: RolloutConfig, implied: Implications, json: boolean): void {
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
  if (summary.segmented.trajectories > 0) {
    process.stdout.write(
      `segments: ${summary.segmented.trajectories} trajectories had an agent history that did not extend the record: ` +
        `${summary.segmented.segments} earlier sequences kept in context_segments (docs/openai-gateway.md)\n`,
    );
  }
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

/**
 * Live progress on stderr: a spinner on a terminal; without one (a log file, nohup, CI) the spinner is silent and a
 * line per tenth of the run shows progress instead. --json keeps stderr quiet for scripts.
 */
export class RolloutProgress {
  private readonly spinner: Ora;
  private readonly progressLines: boolean;
  private nextTenth = 1;
  private inFlight = 0;

  constructor(
    flags: { quiet?: boolean; json?: boolean },
    private readonly run: { total: number; already: number; started: number },
  ) {
    this.spinner = ora({ stream: process.stderr, isSilent: Boolean(flags.quiet) || !process.stderr.isTTY });
    this.progressLines = !flags.quiet && !flags.json && !process.stderr.isTTY;
  }

  start(failedRedone: number): void {
    const { total, already } = this.run;
    this.spinner.start(
      `starting ${total - already} trajectories (${already} already done` +
        (failedRedone ? `, ${failedRedone} failed ones redone` : "") +
        ")",
    );
  }

  trajectoryStarted(): void {
    this.inFlight += 1;
  }

  trajectoryFinished(stats: RolloutStats): void {
    const { total, already, started } = this.run;
    this.inFlight -= 1;
    const s = stats.summary();
    const seconds = (performance.now() - started) / 1000;
    const failed = s.byStatus.failed ?? 0;
    this.spinner.text =
      `${already + s.count}/${total} done | reward ${s.reward.mean.toFixed(3)} | acc ${pct(s.accuracy)} | ` +
      `tool calls/traj ${s.toolCallsPerTrajectory.toFixed(2)} | errors ${failed} failed, ${pct(s.toolErrorRate)} tool | ` +
      `${Math.round(s.sampledTokens / Math.max(seconds, 1e-9))} tok/s | in flight ${this.inFlight}`;
    const todo = total - already;
    if (this.progressLines && todo > 0 && s.count * 10 >= this.nextTenth * todo) {
      process.stderr.write(`${this.spinner.text}\n`);
      this.nextTenth = Math.floor((s.count * 10) / todo) + 1;
    }
  }

  stop(): void {
    this.spinner.stop();
  }
}

/** The --json report: the summary and every count the tables show. */
export function printJsonReport(
  summary: RolloutSummary,
  result: RolloutResult,
  extra: { out: string; wallMs: number; resumed: number; failedRedone: number; failedKept: number; engine: EngineStats },
): void {
  const report = {
    summary,
    out: extra.out,
    wall_ms: extra.wallMs,
    resumed: extra.resumed,
    redone_failed: extra.failedRedone,
    kept_failed: extra.failedKept,
    skipped_prompts: result.skippedPrompts,
    cancelled: result.cancelled,
    cancelled_in_flight: result.cancelledInFlight,
    over_sample_aborted: result.overSampleAborted,
    over_sample_not_started: result.overSampleNotStarted,
    engine: extra.engine,
  };
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}
