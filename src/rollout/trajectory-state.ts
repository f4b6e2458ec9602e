/**
 * What one trajectory carries from turn to turn: the run-wide context it shares with every other trajectory, and
 * its own state (the Conversation, the deadline, the interaction, and the log of facts its record will report).
 * Each stage of run-trajectory.ts (assistant-turn.ts, environment-turn.ts, trajectory-record.ts) reads and updates
 * one TrajectoryInFlight.
 */
import type { ChatModel, Conversation } from "../chat/index.js";
import type { SglangClient } from "../engine/index.js";
import type { FunctionCallParser } from "../parsers/index.js";
import type { ToolRegistry, ToolSession } from "../tools/index.js";
import type { Interaction, InteractionRegistry } from "../interactions/index.js";
import type { LoadedRewardFunction, OverlongBuffer } from "../rewards/index.js";
import type { ToolCallRecord, TrajectorySegment, TrajectoryStatus, VersionSpan } from "../data/trajectory.js";
import type { RolloutSection } from "./config.js";
import type { Sample } from "./sample.js";
import type { AgentLoopRegistry } from "./agent-loops.js";

export interface TrajectoryContext {
  model: ChatModel;
  client: SglangClient;
  parser: FunctionCallParser;
  tools: ToolRegistry | undefined;
  /** Tool schemas given to the chat template (every tool of the YAML, as verl's agent loop does). */
  toolSchemas: Record<string, unknown>[];
  interactions: InteractionRegistry | undefined;
  rewardFunction: LoadedRewardFunction | undefined;
  /** custom_reward_function.reward_kwargs (absent: none). */
  rewardKwargs?: Record<string, unknown>;
  /** reward_model.overlong_buffer when enabled: DAPO's length penalty added to every reward. */
  overlongBuffer?: OverlongBuffer;
  rollout: RolloutSection;
  maxPromptLength: number;
  maxResponseLength: number;
  /** Cancels every trajectory (Ctrl-C, over-sampling abort). */
  signal: AbortSignal;
  /** The training step, when the rollout is part of one. */
  step?: number | null;
  /** Greedy decoding for validation, whatever the config's temperature. */
  greedy?: boolean;
  /** SGLang request priority for every /generate of the rollout (async_training.engine_priority); absent: none sent. */
  priority?: number;
  warn?: (message: string) => void;
  /** The registered agent loops a row's agent_name picks from; absent = the built-ins, tool_agent the default. */
  agentLoops?: AgentLoopRegistry;
}

/** How a trajectory ended: the record's status, finish_reason and error. */
export type Finish = { status: TrajectoryStatus; reason: string; error?: string };

/** What a tool turn adds to its tool segment in the record. */
export type ToolSegmentMeta = Pick<TrajectorySegment, "tool_name" | "arguments" | "latency_ms" | "error">;

/** The facts the record reports that the Conversation does not hold, collected turn by turn. */
export interface TurnLog {
  calls: ToolCallRecord[];
  /** Step rewards of the calls that succeeded. */
  toolRewards: number[];
  /** The interaction's score for each user turn. */
  turnScores: number[];
  /** calc_reward of each tool instance at the end (tool_lifetime: trajectory); null when no instance lived. */
  toolScores: Record<string, number> | null;
  /** The engine's finish reason of each assistant turn, in order. */
  assistantFinish: string[];
  /** One entry per tool turn, in order. */
  toolSegments: ToolSegmentMeta[];
  userTurns: number;
  parseErrors: number;
  genMs: number;
  toolMs: number;
  retries: number;
  /** The server and weight version of the last answered request. */
  server: string | null;
  weightVersion: string | null;
  /** The weight version that sampled each run of response tokens, in order (several per turn after a preemption). */
  versionSpans: VersionSpan[];
}

/** The simulated user of this trajectory, when it has one. */
export interface ActiveInteraction {
  handler: Interaction;
  /** What startInteraction returned; a module that returns nothing gets no user turns. */
  instanceId: string | undefined;
}

export interface TrajectoryInFlight {
  sample: Sample;
  ctx: TrajectoryContext;
  /** The trajectory's key, also its sticky key for the engine client. */
  id: string;
  startedAt: number;
  /** The registered name of the agent loop that runs it. */
  agentLoop: string;
  /** The run's signal or trajectory_timeout, whichever fires first. */
  deadline: AbortSignal;
  conversation: Conversation;
  interaction: ActiveInteraction | undefined;
  /** The trajectory's tool instances (tool_lifetime: trajectory); undefined without tools or per call. */
  toolSession: ToolSession | undefined;
  log: TurnLog;
  /**
   * Earlier token sequences of this episode, oldest first: an OpenAI-API agent whose history stopped extending the
   * record started a new one (src/gateway/history.ts). Absent for every other loop.
   */
  closedSegments?: ClosedSegment[];
  /** The reward the agent itself reported (an OpenAI-API agent's last stdout line); it replaces the reward function. */
  agentReward?: { score: number; extra: Record<string, unknown> };
}

/** A token sequence the episode left behind, with the per-turn facts of its own turns. */
export interface ClosedSegment {
  conversation: Conversation;
  /** Why the next request did not extend it. */
  reason: string;
  assistantFinish: string[];
  versionSpans: VersionSpan[];
}

export function emptyTurnLog(): TurnLog {
  return {
    calls: [],
    toolRewards: [],
    turnScores: [],
    toolScores: null,
    assistantFinish: [],
    toolSegments: [],
    userTurns: 0,
    parseErrors: 0,
    genMs: 0,
    toolMs: 0,
    retries: 0,
    server: null,
    weightVersion: null,
    versionSpans: [],
  };
}

/** An error's message, for a record's `error` field. */
export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
