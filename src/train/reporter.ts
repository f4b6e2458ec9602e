/**
 * What `agentrl train` shows (console.ts): the phase of each step on the status line with the rollout's progress, one
 * summary line per step, the validation metrics, and notes.
 */
import type { RolloutStats } from "../rollout/stats.js";
import { formatDuration } from "../term.js";
import { consoleReporter, type ConsoleFlags } from "./console.js";

export type Phase = "rollout" | "log_prob" | "update" | "sync" | "checkpoint" | "validate";

/** What the console (or --json) shows; the loop never prints by itself. */
export interface TrainReporter {
  phase(step: number, phase: Phase): void;
  rolloutProgress(step: number, done: number, total: number, stats: RolloutStats): void;
  stepDone(step: number, metrics: Record<string, number>): void;
  validationDone(step: number, metrics: Record<string, number>): void;
  note(message: string): void;
}

export function trainReporter(total: number, flags: ConsoleFlags): TrainReporter & { stop(): void } {
  const base = consoleReporter<Phase>(total, flags, {
    step: stepLine,
    validation: (metrics) => Object.entries(metrics).map(([k, v]) => `${k} ${v.toFixed(3)}`).join(" | "),
  });
  return {
    ...base,
    rolloutProgress(_step, done, of, stats) {
      const s = stats.summary();
      base.progress(` ${done}/${of} · reward ${s.reward.mean.toFixed(3)} · acc ${(100 * s.accuracy).toFixed(0)}% · tools/traj ${s.toolCallsPerTrajectory.toFixed(2)}`);
    },
  };
}

const f3 = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? "-" : x.toFixed(3));
/** Three decimals, or three significant digits below 0.001: an early KL of 4e-5 must not read as 0.000. */
const small3 = (x: number | undefined) => (x !== undefined && x !== 0 && Math.abs(x) < 0.001 ? x.toExponential(2) : f3(x));

/**
 * One line per step. The KL to the reference (actor/kl_loss) and the pre-clip gradient norm sit next to the reward,
 * because a collapse shows there first: KL and grad norm climb while the reward falls.
 */
function stepLine(step: number, total: number, m: Record<string, number>): string {
  return (
    `step ${String(step).padStart(4)}/${total} | reward ${f3(m["critic/rewards/mean"])} | acc ${f3(m["acc/mean"])} | ` +
    `kl ${small3(m["actor/kl_loss"] ?? m["actor/ppo_kl"])} | grad_norm ${f3(m["actor/grad_norm"])} | ` +
    `pg_loss ${f3(m["actor/pg_loss"])} | clip ${f3(m["actor/pg_clipfrac"])} | ` +
    `len ${Math.round(m["response_length/mean"] ?? 0)} | turns ${f3(m["num_turns/mean"])} | tools ${f3(m["tool/calls_per_traj"])} | ${timingPart(m)}` +
    asyncPart(m)
  );
}

/**
 * The step's time and its budget: generation (with the engine's busy share), the log-prob pass, the update, the sync;
 * validation, which timing_s/step leaves out, after it when the step validated. `inspect RUN` has the full split.
 */
function timingPart(m: Record<string, number>): string {
  const s = (key: string) => `${(m[key] ?? 0).toFixed(1)}s`;
  const val = m["timing_s/testing"] !== undefined ? ` + val ${s("timing_s/testing")}` : "";
  return (
    `${formatDuration((m["timing_s/step"] ?? 0) * 1000)} (gen ${s("timing_s/gen")} [engine ${s("timing_s/gen_engine_busy")}], ` +
    `log-prob ${s("timing_s/old_log_prob")}, update ${s("timing_s/update_actor")}, sync ${s("timing_s/update_weights")})${val}`
  );
}

/** Only when generation ran ahead (async_training.mode): how stale the step's samples were, and who waited. */
function asyncPart(m: Record<string, number>): string {
  const stale = m["async/staleness_max"] ?? 0;
  const dropped = m["async/dropped_stale"] ?? 0;
  if (stale === 0 && dropped === 0) return "";
  const idle = (key: string) => `${Math.round(100 * (m[key] ?? 0))}%`;
  return ` | stale ≤${stale}${dropped ? ` (${dropped} dropped)` : ""}, idle trainer ${idle("trainer/idle_ratio")} gen ${idle("rollouter/idle_ratio")}`;
}
