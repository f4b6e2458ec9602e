/**
 * One trajectory, as one plain async function from a sample to its record: start the conversation, then run the
 * sample's agent loop (its agent_name's, else the default: the built-in tool loop samples the assistant turn by turn
 * and lets the tools or the simulated user answer, until the model stops, a limit is hit, or the deadline passes);
 * then score and record it. The loops are in agent-loop.ts; concurrency lives outside (see run-rollout.ts).
 *
 * Token-in/token-out: the request is always the conversation's own token record, and what the engine returns is
 * appended untouched (mask 1). Environment turns are template deltas (mask 0). Expected outcomes (length, abort,
 * deadline, a server that stays down, tool failures) end up as a status and a finish reason in the record, never as
 * an exception; only bugs and bad configuration throw.
 */
import { trajectoryKey, type Trajectory } from "../data/trajectory.js";
import { onAbort } from "../signal-fanout.js";
import { ToolSession, type ToolsKwargs } from "../tools/index.js";
import type { Sample } from "./sample.js";
import type { Conversation } from "../chat/index.js";
import { runAgentLoop, type SelectedAgentLoop } from "./agent-loop.js";
import { AgentLoopRegistry } from "./agent-loops.js";
import { openConversation } from "./conversation-start.js";
import { finishTrajectory } from "./trajectory-record.js";
import { emptyTurnLog, type ActiveInteraction, type TrajectoryContext, type TrajectoryInFlight } from "./trajectory-state.js";

export type { TrajectoryContext } from "./trajectory-state.js";
export { PromptTooLongError } from "./conversation-start.js";

const BUILTIN_LOOPS = AgentLoopRegistry.builtin();

export async function runTrajectory(sample: Sample, ctx: TrajectoryContext): Promise<Trajectory> {
  // An unknown agent_name is the dataset's fault (exit 2), found before anything starts.
  const loop = (ctx.agentLoops ?? BUILTIN_LOOPS).select(sample.agentName, `row ${sample.dataIndex}`);
  const startedAt = Date.now();
  const deadline = trajectoryDeadline(ctx.signal, ctx.rollout.trajectory_timeout * 1000);
  try {
    const run = await startTrajectory(sample, ctx, loop, startedAt, deadline.signal);
    // The tool instances die with the trajectory, whichever way it ends (verl releases them at the end too).
    try {
      const finish = await runAgentLoop(loop, run);
      if (run.toolSession) run.log.toolScores = await run.toolSession.scores();
      return await finishTrajectory(run, finish);
    } finally {
      await run.toolSession?.release();
    }
  } finally {
    deadline.release();
  }
}

/**
 * The run's signal or trajectory_timeout, whichever fires first (the timeout's reason is a TimeoutError, as
 * AbortSignal.timeout's). Made by hand and released when the trajectory ends: AbortSignal.any([run, timeout]) cost
 * ~20 µs of CPU per trajectory, most of it the garbage collector clearing the weak links Node keeps from the
 * run-wide signal to every trajectory's.
 */
function trajectoryDeadline(runSignal: AbortSignal, timeoutMs: number): { signal: AbortSignal; release: () => void } {
  const controller = new AbortController();
  // Every trajectory in flight listens on the run's signal: through a fan-out, whose add and remove stay O(1) with
  // thousands in flight (signal-fanout.ts).
  const unsubscribe = onAbort(runSignal, (reason) => controller.abort(reason));
  const timer = setTimeout(() => controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")), timeoutMs);
  // Like AbortSignal.timeout's timer, it never keeps the process alive on its own.
  timer.unref();
  return {
    signal: controller.signal,
    release: () => {
      clearTimeout(timer);
      unsubscribe();
    },
  };
}

/**
 * Renders the prompt into a Conversation, checks its length, and starts the sample's interaction, if any. A loop that
 * renders its own prompt (the OpenAI gateway's: the agent's first request is the prompt) gets the row's rendered only
 * if something reads the conversation before it opens its own, e.g. the record of an agent that never called the
 * model; so the row's prompt is neither rendered for nothing nor refused for a length the agent's prompt need not have.
 */
async function startTrajectory(
  sample: Sample,
  ctx: TrajectoryContext,
  loop: SelectedAgentLoop,
  startedAt: number,
  deadline: AbortSignal,
): Promise<TrajectoryInFlight> {
  const conversation = loop.internal ? undefined : openConversation(sample, ctx);
  const interaction = await startInteraction(sample, ctx);
  const id = trajectoryKey(sample.dataIndex, sample.sampleIndex);
  const toolSession = await startToolSession(sample, ctx, deadline);
  const log = emptyTurnLog();
  if (conversation) return { sample, ctx, id, agentLoop: loop.name, startedAt, deadline, conversation, interaction, toolSession, log };
  let opened: Conversation | undefined;
  return {
    sample, ctx, id, agentLoop: loop.name, startedAt, deadline, interaction, toolSession, log,
    get conversation(): Conversation {
      return (opened ??= openConversation(sample, ctx));
    },
    set conversation(value: Conversation) {
      opened = value;
    },
  };
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
