/**
 * The end of a trajectory: let go of its sticky server, check the tokens for drift, score the response, and write
 * it all into the record (docs/trajectory-format.md). A reward function that throws makes this trajectory failed,
 * not the run.
 */
import type { ConversationExport, DriftReport } from "../chat/index.js";
import { computeReward, overlongReward, type OverlongBuffer } from "../rewards/index.js";
import { TRAJECTORY_FORMAT_VERSION, type ContextSegment, type Trajectory, type TrajectorySegment } from "../data/trajectory.js";
import { recordMessages } from "../data/trajectory-encoding.js";
import { errorText, type ClosedSegment, type Finish, type TrajectoryInFlight, type TurnLog } from "./trajectory-state.js";

interface Scored {
  score: number;
  extra: Record<string, unknown>;
  /** Set when the reward function threw. */
  error?: string;
}

export async function finishTrajectory(run: TrajectoryInFlight, finish: Finish): Promise<Trajectory> {
  const { ctx, conversation } = run;
  ctx.client.forgetStickyKey(run.id);
  const drift = conversation.driftMode === "off" ? undefined : conversation.driftCheck();
  const exported = conversation.export();
  // An agent that reported its own reward is scored by it; the reward function is not asked.
  const scored: Scored = run.agentReward ?? (await scoreResponse(run, ctx.model.decode(exported.responseIds, { skipSpecialTokens: true })));
  const reward = ctx.overlongBuffer && scored.error === undefined ? withOverlongReward(scored, exported.responseIds.length, ctx.maxResponseLength, ctx.overlongBuffer) : scored;
  const outcome: Finish = reward.error === undefined ? finish : { status: "failed", reason: "reward_error", error: reward.error };
  return trajectoryRecord(run, exported, outcome, reward, drift);
}

/** DAPO's overlong shaping added to the reward (reward_model.overlong_buffer), and logged in reward_extra when asked. */
function withOverlongReward(scored: Scored, responseLength: number, maxResponseLength: number, buffer: OverlongBuffer): Scored {
  const penalty = overlongReward(responseLength, maxResponseLength, buffer);
  const extra = buffer.log ? { ...scored.extra, overlong_reward: penalty, overlong: penalty < 0 } : scored.extra;
  return { ...scored, score: scored.score + penalty, extra };
}

async function scoreResponse(run: TrajectoryInFlight, responseText: string): Promise<Scored> {
  const { sample, ctx, log } = run;
  try {
    return await computeReward(
      {
        dataSource: sample.dataSource,
        responseText,
        groundTruth: sample.groundTruth,
        extraInfo: sample.extraInfo,
        toolRewards: log.toolRewards,
        turnScores: log.turnScores,
        toolScores: log.toolScores ?? {},
      },
      ctx.rewardFunction,
      ctx.rewardKwargs,
      { dataIndex: sample.dataIndex, trajectoryId: run.id },
    );
  } catch (err) {
    // Only a user's reward module is an expected failure; the built-in scoring throwing is a bug.
    if (!ctx.rewardFunction) throw err;
    return { score: 0, extra: {}, error: `reward function failed: ${errorText(err)}` };
  }
}

/** The conversation's segments, with what the turn log knows about each assistant and tool turn. */
function segmentsOf(segments: ConversationExport["segments"], log: TurnLog): TrajectorySegment[] {
  let toolSegment = 0;
  let assistantSegment = 0;
  return segments.map((segment) => {
    const base = {
      kind: segment.kind,
      turn: segment.turn,
      start: segment.start,
      end: segment.end,
      text: segment.text,
      tool_name: null,
      arguments: null,
      latency_ms: null,
      error: null,
      finish_reason: null,
    } satisfies TrajectorySegment;
    if (segment.kind === "assistant") return { ...base, finish_reason: log.assistantFinish[assistantSegment++] ?? null };
    if (segment.kind === "tool") return { ...base, ...(log.toolSegments[toolSegment++] ?? {}) };
    return base;
  });
}

/** A closed segment of the episode as the record keeps it, with its own drift check. */
function contextSegment(segment: ClosedSegment): ContextSegment {
  const { conversation } = segment;
  const drift = conversation.driftMode === "off" ? undefined : conversation.driftCheck();
  const exported = conversation.export();
  return {
    prompt_ids: exported.promptIds,
    response_ids: exported.responseIds,
    response_mask: exported.responseMask,
    response_logprobs: exported.responseLogprobs,
    messages: recordMessages(exported.messages),
    reason: segment.reason,
    drift: drift?.status ?? "skipped",
  };
}

/** The tools' calc_reward values that go into the reward: their sum with tool_score_reward: sum, else nothing. */
function toolScoreReward(run: TrajectoryInFlight): number {
  if (run.ctx.rollout.multi_turn.tool_score_reward !== "sum" || !run.log.toolScores) return 0;
  return Object.values(run.log.toolScores).reduce((a, b) => a + b, 0);
}

function trajectoryRecord(
  run: TrajectoryInFlight,
  exported: ConversationExport,
  finish: Finish,
  reward: Scored,
  drift: DriftReport | undefined,
): Trajectory {
  const { sample, log } = run;
  const isToolCall = (c: (typeof log.calls)[number]) => !c.error_kind?.startsWith("parse:");
  return {
    format_version: TRAJECTORY_FORMAT_VERSION,
    id: run.id,
    data_index: sample.dataIndex,
    sample_index: sample.sampleIndex,
    group_id: sample.groupId,
    data_source: sample.dataSource,
    agent_loop: run.agentLoop,
    ground_truth: sample.groundTruth,
    status: finish.status,
    finish_reason: finish.reason,
    error: finish.error ?? null,
    prompt_ids: exported.promptIds,
    response_ids: exported.responseIds,
    response_mask: exported.responseMask,
    response_logprobs: exported.responseLogprobs,
    trainer_logprobs: null,
    segments: segmentsOf(exported.segments, log),
    calls: log.calls,
    messages: recordMessages(exported.messages),
    reward: reward.score + toolScoreReward(run),
    score: reward.score,
    tool_rewards: log.toolRewards,
    turn_scores: log.turnScores,
    tool_scores: log.toolScores ? { ...log.toolScores } : null,
    reward_extra: Object.keys(reward.extra).length ? reward.extra : null,
    advantage: null,
    num_turns: exported.assistantTurns + log.userTurns + 1,
    assistant_turns: exported.assistantTurns,
    user_turns: log.userTurns,
    tool_calls: log.calls.filter(isToolCall).length,
    tool_errors: log.calls.filter((c) => c.error_kind != null && isToolCall(c)).length,
    parse_errors: log.parseErrors,
    drift: drift?.status ?? "skipped",
    drift_detail: drift && drift.status !== "match" ? { ...drift } : null,
    server: log.server,
    weight_version: log.weightVersion,
    version_spans: log.versionSpans,
    context_segments: (run.closedSegments ?? []).map(contextSegment),
    step: run.ctx.step ?? null,
    started_at: run.startedAt,
    gen_ms: log.genMs,
    tool_ms: log.toolMs,
    total_ms: Date.now() - run.startedAt,
    retries: log.retries,
  };
}
