/**
 * One trajectory, as one plain async function from a sample to its record: start the conversation, then turn by
 * turn sample the assistant and let the tools or the simulated user answer, until the model stops, a limit is hit,
 * or the deadline passes; then score and record it. Concurrency lives outside (see run-rollout.ts).
 *
 * Token-in/token-out: the request is always the conversation's own token record, and what the engine returns is
 * appended untouched (mask 1). Environment turns are template deltas (mask 0). Expected outcomes (length, abort,
 * deadline, a server that stays down, tool failures) end up as a status and a finish reason in the record, never as
 * an exception; only bugs and bad configuration throw.
 */
import { Conversation } from "../chat/index.js";
import { trajectoryKey, type Trajectory } from "../data/trajectory.js";
import { ToolSession, type ToolsKwargs } from "../tools/index.js";
import type { Sample } from "./sample.js";
import { parseToolCalls, sampleAssistantTurn } from "./assistant-turn.js";
import { interactionTurn, toolTurn } from "./environment-turn.js";
import { finishTrajectory } from "./trajectory-record.js";
import {
  emptyTurnLog,
  type ActiveInteraction,
  type Finish,
  type TrajectoryContext,
  type TrajectoryInFlight,
} from "./trajectory-state.js";

export type { TrajectoryContext } from "./trajectory-state.js";

/** The rendered prompt is longer than data.max_prompt_length; the rollout skips the prompt or fails. */
export class PromptTooLongError extends Error {
  constructor(
    readonly dataIndex: number,
    readonly length: number,
    readonly limit: number,
  ) {
    super(`row ${dataIndex}: the rendered prompt has ${length} tokens, over data.max_prompt_length=${limit}`);
  }
}

export async function runTrajectory(sample: Sample, ctx: TrajectoryContext): Promise<Trajectory> {
  const run = await startTrajectory(sample, ctx);
  // The tool instances die with the trajectory, whichever way it ends (verl releases them at the end too).
  try {
    let finish: Finish | undefined;
    while (!finish) finish = await takeTurn(run);
    if (run.toolSession) run.log.toolScores = await run.toolSession.scores();
    return await finishTrajectory(run, finish);
  } finally {
    await run.toolSession?.release();
  }
}

/** One assistant turn and the environment's answer to it; a Finish when the trajectory ends there. */
async function takeTurn(run: TrajectoryInFlight): Promise<Finish | undefined> {
  const sampled = await sampleAssistantTurn(run);
  if (sampled) return sampled;
  if (!run.ctx.rollout.multi_turn.enable) return { status: "completed", reason: "stop" };
  const calls = parseToolCalls(run);
  const limit = turnLimitFinish(run, calls !== undefined);
  if (limit) return limit;
  if (calls) return toolTurn(run, calls);
  if (run.interaction?.instanceId !== undefined) {
    return interactionTurn(run, run.interaction.handler, run.interaction.instanceId);
  }
  // No call and nobody to reply: the model is done.
  return { status: "completed", reason: "stop" };
}

/** Renders the prompt into a Conversation, checks its length, and starts the sample's interaction, if any. */
async function startTrajectory(sample: Sample, ctx: TrajectoryContext): Promise<TrajectoryInFlight> {
  const startedAt = Date.now();
  const multiTurn = ctx.rollout.multi_turn;
  const deadline = AbortSignal.any([ctx.signal, AbortSignal.timeout(ctx.rollout.trajectory_timeout * 1000)]);
  const conversation = Conversation.start(ctx.model, sample.messages, {
    tools: ctx.toolSchemas,
    driftMode: multiTurn.tokenization_sanity_check_mode === "disable" ? "off" : multiTurn.tokenization_sanity_check_mode,
  });
  if (conversation.promptLength > ctx.maxPromptLength) {
    throw new PromptTooLongError(sample.dataIndex, conversation.promptLength, ctx.maxPromptLength);
  }
  const interaction = await startInteraction(sample, ctx);
  const id = trajectoryKey(sample.dataIndex, sample.sampleIndex);
  const toolSession = await startToolSession(sample, ctx, deadline);
  return { sample, ctx, id, startedAt, deadline, conversation, interaction, toolSession, log: emptyTurnLog() };
}

/** With tool_lifetime: trajectory, the trajectory's tool instances, created now for the tools its tools_kwargs names. */
async function startToolSession(sample: Sample, ctx: TrajectoryContext, deadline: AbortSignal): Promise<ToolSession | undefined> {
  const multiTurn = ctx.rollout.multi_turn;
  if (!ctx.tools || !multiTurn.enable || multiTurn.tool_lifetime !== "trajectory") return undefined;
  const session = new ToolSession(ctx.tools, sample.toolsKwargs as ToolsKwargs, {
    timeoutMs: multiTurn.tool_timeout * 1000,
    signal: deadline,
    ...(ctx.warn ? { warn: ctx.warn } : {}),
  });
  await session.start();
  return session;
}

/**
 * The simulated user of a sample: the interaction its interaction_kwargs name, or, without tools, the only one
 * configured.
 */
async function startInteraction(sample: Sample, ctx: TrajectoryContext): Promise<ActiveInteraction | undefined> {
  const where = `row ${sample.dataIndex}`;
  const handler = ctx.interactions && Object.keys(sample.interactionKwargs).length > 0
    ? ctx.interactions.select(sample.interactionKwargs, where)
    : ctx.interactions?.names().length === 1 && !ctx.tools
      ? ctx.interactions.select(undefined, where)
      : undefined;
  if (!handler) return undefined;
  return { handler, instanceId: await handler.startInteraction(undefined, sample.interactionKwargs) };
}

/** multi_turn's turn limits, checked after each assistant turn; `attempted`: the turn made (or botched) a call. */
function turnLimitFinish(run: TrajectoryInFlight, attempted: boolean): Finish | undefined {
  const multiTurn = run.ctx.rollout.multi_turn;
  if (multiTurn.max_assistant_turns !== null && run.conversation.assistantTurns >= multiTurn.max_assistant_turns) {
    return { status: "completed", reason: attempted ? "max_assistant_turns" : "stop" };
  }
  const answers = attempted || run.interaction !== undefined;
  if (multiTurn.max_user_turns !== null && run.log.userTurns >= multiTurn.max_user_turns && answers) {
    return { status: "completed", reason: "max_user_turns" };
  }
  return undefined;
}
