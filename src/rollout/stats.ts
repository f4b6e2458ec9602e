/**
 * Running statistics over trajectories: what the rollout's live progress and closing table show, and what
 * `agentrl inspect` summarises from a file. One accumulator, so both read the same numbers.
 */
import { trajectoryAcc, type Trajectory } from "../data/trajectory.js";

export interface RolloutSummary {
  count: number;
  byStatus: Record<string, number>;
  finishReasons: Record<string, number>;
  reward: { mean: number; std: number; min: number; max: number };
  /** Mean accuracy: the scorer's reported acc, else score >= 1 (trajectoryAcc; GSM8K: a correct final answer). */
  accuracy: number;
  /** assistant turns → trajectories. */
  turnsHistogram: Record<string, number>;
  toolCallsPerTrajectory: number;
  /** Trajectories that made at least one tool call. */
  toolCallRate: number;
  /** Parse errors per attempted call (calls + parse errors). */
  parseErrorRate: number;
  /** Failed calls per executed call. */
  toolErrorRate: number;
  driftCount: number;
  /** Trajectories whose loss mask covers no token: nothing to train on. */
  emptyMaskCount: number;
  /** Trajectories whose OpenAI-API agent rewrote its history (context_segments), and how many segments they closed. */
  segmented: { trajectories: number; segments: number };
  retries: number;
  sampledTokens: number;
  responseTokens: { mean: number; max: number };
}

/** The fields the statistics read: a whole Trajectory, or inspect's column-projected record with typed-array tokens. */
export type RolloutStatsInput = Pick<
  Trajectory,
  "status" | "finish_reason" | "assistant_turns" | "reward" | "score" | "tool_calls" | "tool_errors" | "parse_errors" | "drift" | "retries"
> & Partial<Pick<Trajectory, "reward_extra" | "context_segments">> & { response_mask: ArrayLike<number>; response_ids: ArrayLike<number> };

export class RolloutStats {
  private count = 0;
  private readonly byStatus: Record<string, number> = {};
  private readonly finishReasons: Record<string, number> = {};
  private readonly turns: Record<string, number> = {};
  private rewardSum = 0;
  private rewardSqSum = 0;
  private rewardMin = Infinity;
  private rewardMax = -Infinity;
  private correct = 0;
  private toolCalls = 0;
  private toolErrors = 0;
  private parseErrors = 0;
  private withCalls = 0;
  private drift = 0;
  private emptyMask = 0;
  private segmentedTrajectories = 0;
  private closedSegments = 0;
  private retries = 0;
  private sampledTokens = 0;
  private responseTokens = 0;
  private responseMax = 0;

  add(t: RolloutStatsInput): void {
    this.count += 1;
    bump(this.byStatus, t.status);
    bump(this.finishReasons, t.finish_reason);
    bump(this.turns, String(t.assistant_turns));
    this.rewardSum += t.reward;
    this.rewardSqSum += t.reward * t.reward;
    this.rewardMin = Math.min(this.rewardMin, t.reward);
    this.rewardMax = Math.max(this.rewardMax, t.reward);
    this.correct += trajectoryAcc(t);
    this.toolCalls += t.tool_calls;
    this.toolErrors += t.tool_errors;
    this.parseErrors += t.parse_errors;
    if (t.tool_calls > 0) this.withCalls += 1;
    if (t.drift === "drift") this.drift += 1;
    const segments = t.context_segments?.length ?? 0;
    if (segments > 0) this.segmentedTrajectories += 1;
    this.closedSegments += segments;
    let sampled = 0;
    for (let i = 0; i < t.response_mask.length; i++) sampled += t.response_mask[i]!;
    if (sampled === 0) this.emptyMask += 1;
    this.sampledTokens += sampled;
    this.responseTokens += t.response_ids.length;
    this.responseMax = Math.max(this.responseMax, t.response_ids.length);
    this.retries += t.retries;
  }

  get size(): number {
    return this.count;
  }

  get meanReward(): number {
    return this.count ? this.rewardSum / this.count : 0;
  }

  summary(): RolloutSummary {
    const n = this.count;
    const mean = n ? this.rewardSum / n : 0;
    const variance = n > 1 ? Math.max(0, (this.rewardSqSum - n * mean * mean) / (n - 1)) : 0;
    const attempted = this.toolCalls + this.parseErrors;
    return {
      count: n,
      byStatus: { ...this.byStatus },
      finishReasons: { ...this.finishReasons },
      reward: { mean, std: Math.sqrt(variance), min: n ? this.rewardMin : 0, max: n ? this.rewardMax : 0 },
      accuracy: n ? this.correct / n : 0,
      turnsHistogram: { ...this.turns },
      toolCallsPerTrajectory: n ? this.toolCalls / n : 0,
      toolCallRate: n ? this.withCalls / n : 0,
      parseErrorRate: attempted ? this.parseErrors / attempted : 0,
      toolErrorRate: this.toolCalls ? this.toolErrors / this.toolCalls : 0,
      driftCount: this.drift,
      emptyMaskCount: this.emptyMask,
      segmented: { trajectories: this.segmentedTrajectories, segments: this.closedSegments },
      retries: this.retries,
      sampledTokens: this.sampledTokens,
      responseTokens: { mean: n ? this.responseTokens / n : 0, max: this.responseMax },
    };
  }
}

function bump(counts: Record<string, number>, key: string): void {
  counts[key] = (counts[key] ?? 0) + 1;
}
