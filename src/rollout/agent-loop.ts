/**
 * Agent loops: what runs between the start of a trajectory and its record. A loop is a function of an AgentLoopApi,
 * the primitives of one trajectory: generate (token-in/token-out, mask 1), parse and call tools (with their error
 * observations), ask the simulated user, append messages (template deltas, mask 0). The Conversation owns the token
 * record and its masks; a loop only ever adds to it through these primitives. The built-in loops (tool_agent,
 * single_turn_agent) are written on the same API a user's module gets (docs/agent-loops.md).
 */
import type { ChatMessage, ToolSchema } from "../chat/index.js";
import type { TopLogprob } from "../engine/index.js";
import type { ParseResult } from "../parsers/index.js";
import type { MultiTurnConfig } from "./config.js";
import type { Sample } from "./sample.js";
import { deadlineFinish, parseToolCalls, sampleAssistantTurn } from "./assistant-turn.js";
import { appendEnvironment, interactionTurn, toolTurn } from "./environment-turn.js";
import { toolSegmentOf } from "./tool-calls.js";
import type { ToolCallRecord } from "../data/trajectory.js";
import { openConversation, PromptTooLongError } from "./conversation-start.js";
import { errorText, type Finish, type TrajectoryInFlight } from "./trajectory-state.js";

/** One assistant turn: the ids the engine sampled (appended with mask 1) and their text; `finish` ends the trajectory. */
export interface Generation {
  ids: number[];
  /** The turn's text without special tokens. */
  text: string;
  /** The engine's finish reason for the turn (stop, length, abort); null when nothing was sampled. */
  finishReason: string | null;
  /** Set when the trajectory ends with this turn (length cut, budget spent, deadline, server down, abort). */
  finish?: Finish;
  /** With GenerateOptions.topLogprobs: per id of `ids`, the engine's most likely tokens there, most likely first. */
  topLogprobs?: TopLogprob[][];
}

/** What one generate() call may ask for besides the trajectory's sampling settings. */
export interface GenerateOptions {
  /** Caps this turn below the response budget left. */
  maxNewTokens?: number;
  /** Stop strings for this turn (SGLang's `stop`): the engine ends the turn where one appears. */
  stop?: readonly string[];
  /**
   * A JSON schema (as JSON text) this turn's output must match, by the engine's grammar-constrained decoding
   * (SGLang's `json_schema`; the embedded engine does not enforce it). A turn that a weight update preempts continues
   * without it: a grammar cannot resume mid-output.
   */
  jsonSchema?: string;
  /**
   * Also ask the engine for this many most likely tokens at every sampled position (SGLang's `top_logprobs_num`),
   * returned in Generation.topLogprobs. The record keeps only the sampled tokens' log-probs.
   */
  topLogprobs?: number;
}

/** A tool call a loop makes itself, by name (the model's own calls come from parseToolCalls). */
export interface ToolCallRequest {
  name: string;
  arguments: Record<string, unknown>;
}

/** What the token record holds so far (copies: writing to them changes nothing). */
export interface TokenRecordView {
  ids: number[];
  /** 0 on prompt and environment tokens, 1 on sampled tokens; owned by the Conversation. */
  mask: number[];
  promptLength: number;
  responseLength: number;
  assistantTurns: number;
}

/**
 * The primitives of one trajectory. Every primitive that can end the trajectory returns a Finish (or a Generation
 * with one); once one has, the trajectory is over: later primitives do nothing and return that Finish again, and it
 * is the trajectory's outcome whatever the loop returns.
 */
export interface AgentLoopApi {
  /** The dataset row the trajectory runs: messages, groundTruth, toolsKwargs, interactionKwargs, extraInfo, agentName. */
  readonly sample: Readonly<Sample>;
  /** The trajectory's id (`<data_index>-<sample_index>`). */
  readonly id: string;
  /**
   * Aborts at the trajectory's deadline (trajectory_timeout, over-sampling, Ctrl-C). The primitives honour it
   * themselves; a loop that waits on something else should too: past the deadline the trajectory is recorded without
   * waiting for the loop.
   */
  readonly signal: AbortSignal;
  /** actor_rollout_ref.rollout.multi_turn. */
  readonly multiTurn: Readonly<MultiTurnConfig>;
  /** True when a simulated user (interaction) answers this trajectory. */
  readonly hasInteraction: boolean;
  /** The conversation's messages so far (copies). */
  messages(): ChatMessage[];
  tokens(): TokenRecordView;
  /**
   * Sends the token record to /generate and appends the sampled ids untouched (mask 1). `maxNewTokens` caps this turn
   * below the response budget left: a turn cut there (finishReason "length") does not end the trajectory, and what
   * follows it (append, callTools) closes it with the end-of-turn token, mask 0.
   */
  generate(options?: GenerateOptions): Promise<Generation>;
  /** The last assistant turn's tool calls and parse errors; undefined when it attempted none (or without tools). */
  parseToolCalls(): ParseResult | undefined;
  /** Runs calls through the trajectory's tool session and appends their observations (errors included, mask 0). */
  callTools(calls: ParseResult | readonly ToolCallRequest[]): Promise<Finish | undefined>;
  /** Asks the simulated user for its reply and appends it (mask 0); its last reply ends the trajectory. */
  interact(): Promise<Finish | undefined>;
  /**
   * Appends messages (a user message, an observation): after an assistant turn as a template delta (mask 0); before
   * the first one, they join the prompt, which is rendered again.
   */
  append(messages: readonly ChatMessage[]): Finish | undefined;
  /** multi_turn's max_assistant_turns / max_user_turns, checked after an assistant turn; `attemptedCall`: it made one. */
  turnLimit(attemptedCall: boolean): Finish | undefined;
  /** The built-in tool loop (tool_agent), run from where the trajectory is now. */
  runToolLoop(): Promise<Finish>;
}

/** A loop returns how the trajectory ended, or nothing (completed, stop). */
export type AgentLoop = (agent: AgentLoopApi) => Promise<Finish | void | undefined> | Finish | void | undefined;

const STOP: Finish = { status: "completed", reason: "stop" };

/** The built-in loop (verl's tool_agent): generate; tools, the simulated user, or stop; until something ends it. */
export async function toolAgentLoop(agent: AgentLoopApi): Promise<Finish> {
  for (;;) {
    const generated = await agent.generate();
    if (generated.finish) return generated.finish;
    if (!agent.multiTurn.enable) return STOP;
    const calls = agent.parseToolCalls();
    const limit = agent.turnLimit(calls !== undefined);
    if (limit) return limit;
    // No call and nobody to reply: the model is done.
    const answered = calls ? await agent.callTools(calls) : agent.hasInteraction ? await agent.interact() : STOP;
    if (answered) return answered;
  }
}

/** verl's single_turn_agent: one assistant turn, no tools. */
export async function singleTurnAgentLoop(agent: AgentLoopApi): Promise<Finish> {
  return (await agent.generate()).finish ?? STOP;
}

/** A loop chosen for a trajectory: its registered name, and whether it is agentrl's own (then a throw is a bug). */
export interface SelectedAgentLoop {
  name: string;
  loop: AgentLoop;
  builtin: boolean;
  /**
   * Set for loops agentrl runs on the trajectory's own state (the OpenAI gateway's, which renders the agent's own
   * prompt and tools and can open new segments): called instead of `loop`, with the same API beside the state.
   */
  internal?: (api: TrajectoryControl, run: TrajectoryInFlight) => Promise<Finish | void | undefined>;
}

/** The API plus what only agentrl's own loops touch: the trajectory's outcome so far, and ending it. */
export interface TrajectoryControl extends AgentLoopApi {
  /** The Finish a primitive returned (or endWith set): the trajectory is over. */
  readonly ended: Finish | undefined;
  /** Ends the trajectory with `finish` unless it has ended already; returns the Finish that holds. */
  endWith(finish: Finish): Finish;
  /**
   * Renders `messages` with `tools` (and template variables over the run's) as the trajectory's current token
   * sequence (the agent's own prompt, or a new segment); the rendered length instead when it is over
   * data.max_prompt_length (nothing changes then).
   */
  openSequence(messages: readonly ChatMessage[], tools: readonly ToolSchema[], templateKwargs?: Record<string, unknown>): { tooLong?: { length: number; limit: number } };
  /** parseToolCalls against the given tool names (an agent's request names its own tools). */
  parseToolCallsOf(toolNames: readonly string[]): ParseResult | undefined;
  /**
   * Records calls the agent ran itself (their results came back as tool messages): in the record's `calls`, and, when
   * the results alone made the last appended delta, as that tool segment's name, arguments and latency.
   */
  recordAgentCalls(records: readonly ToolCallRecord[], toolSegment: boolean): void;
}

/**
 * Runs the loop on the trajectory and returns its outcome. A user's loop that throws fails the trajectory (the run
 * goes on); a built-in one that throws is a bug and throws on. A user's loop still running at the deadline is left
 * behind: the trajectory ends there, once the primitive in flight (which honours the deadline) has settled, and
 * whatever the loop does later changes nothing.
 */
export async function runAgentLoop(selected: SelectedAgentLoop, run: TrajectoryInFlight): Promise<Finish> {
  const api = new TrajectoryAgent(run);
  let returned: Finish | void | undefined | typeof DEADLINE;
  try {
    const running = Promise.resolve(selected.internal ? selected.internal(api, run) : selected.loop(api));
    returned = selected.builtin ? await running : await Promise.race([running, deadlinePassed(run.deadline)]);
  } catch (err) {
    if (selected.builtin || err instanceof PromptTooLongError) throw err;
    return api.ended ?? { status: "failed", reason: "agent_loop_error", error: `agent loop ${selected.name} failed: ${errorText(err)}` };
  }
  if (returned === DEADLINE) return api.abandon(deadlineFinish(run.ctx.signal));
  return api.ended ?? finishOf(returned, selected.name);
}

const DEADLINE = Symbol("deadline");

function deadlinePassed(signal: AbortSignal): Promise<typeof DEADLINE> {
  if (signal.aborted) return Promise.resolve(DEADLINE);
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(DEADLINE), { once: true }));
}

const STATUSES = new Set(["completed", "truncated", "aborted", "failed"]);

/** What a loop returned, checked: nothing is a stop; anything but a Finish fails the trajectory, naming the loop. */
function finishOf(returned: unknown, name: string): Finish {
  if (returned === undefined || returned === null) return STOP;
  const finish = returned as Partial<Finish>;
  if (typeof finish === "object" && STATUSES.has(finish.status as string) && typeof finish.reason === "string") {
    return { status: finish.status!, reason: finish.reason, ...(typeof finish.error === "string" ? { error: finish.error } : {}) };
  }
  return {
    status: "failed",
    reason: "agent_loop_error",
    error: `agent loop ${name} returned ${JSON.stringify(returned)?.slice(0, 200)}, not undefined or { status, reason }`,
  };
}

/** The AgentLoopApi of one trajectory in flight. */
class TrajectoryAgent implements TrajectoryControl {
  /** The Finish a primitive returned: the trajectory is over. */
  ended: Finish | undefined;
  /** The primitives running now: the record waits for them before it is read. */
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(private readonly run: TrajectoryInFlight) {}

  get sample(): Readonly<Sample> {
    return this.run.sample;
  }
  get id(): string {
    return this.run.id;
  }
  get signal(): AbortSignal {
    return this.run.deadline;
  }
  get multiTurn(): Readonly<MultiTurnConfig> {
    return this.run.ctx.rollout.multi_turn;
  }
  get hasInteraction(): boolean {
    return this.run.interaction?.instanceId !== undefined;
  }

  messages(): ChatMessage[] {
    return this.run.conversation.messages.map((message) => structuredClone(message));
  }

  tokens(): TokenRecordView {
    const { conversation } = this.run;
    return {
      ids: [...conversation.tokenIds],
      mask: [...conversation.lossMask],
      promptLength: conversation.promptLength,
      responseLength: conversation.responseLength,
      assistantTurns: conversation.assistantTurns,
    };
  }

  generate(options: GenerateOptions = {}): Promise<Generation> {
    return this.track(this.generateTurn(options));
  }

  private async generateTurn(options: GenerateOptions): Promise<Generation> {
    if (this.ended) return { ids: [], text: "", finishReason: null, finish: this.ended };
    const cap = options.maxNewTokens;
    if (cap !== undefined && !(Number.isInteger(cap) && cap > 0)) throw new Error(`generate(): maxNewTokens must be a positive integer, not ${cap}`);
    const before = this.run.conversation.totalLength;
    const turns = this.run.log.assistantFinish.length;
    const topLogprobs: TopLogprob[][] | undefined = options.topLogprobs ? [] : undefined;
    const finish = this.end(await sampleAssistantTurn(this.run, options, topLogprobs));
    const ids = this.run.conversation.idsBetween(before);
    const model = this.run.ctx.model;
    let text: string | undefined;
    const finishReason = this.run.log.assistantFinish.length > turns ? this.run.log.assistantFinish.at(-1)! : null;
    return {
      ids,
      // Decoded on first read: the built-in loops never read it, and a decode per turn was a visible share of the
      // client's CPU on distinct conversations (bench/rollout-overhead.mjs).
      get text() {
        return (text ??= model.decode(ids, { skipSpecialTokens: true }));
      },
      finishReason,
      ...(finish ? { finish } : {}),
      ...(topLogprobs ? { topLogprobs } : {}),
    };
  }

  parseToolCalls(): ParseResult | undefined {
    return this.ended ? undefined : parseToolCalls(this.run);
  }

  callTools(calls: ParseResult | readonly ToolCallRequest[]): Promise<Finish | undefined> {
    return this.track(this.runCalls(calls));
  }

  private async runCalls(calls: ParseResult | readonly ToolCallRequest[]): Promise<Finish | undefined> {
    if (this.ended) return this.ended;
    const parsed: ParseResult = Array.isArray(calls)
      ? { normalText: "", calls: calls.map((call) => ({ ...call, raw: JSON.stringify(call) })), errors: [], hasCallMarker: true }
      : (calls as ParseResult);
    return this.end(await toolTurn(this.run, parsed));
  }

  interact(): Promise<Finish | undefined> {
    return this.track(this.askUser());
  }

  private async askUser(): Promise<Finish | undefined> {
    if (this.ended) return this.ended;
    const interaction = this.run.interaction;
    if (interaction?.instanceId === undefined) throw new Error("interact(): this trajectory has no simulated user (hasInteraction is false)");
    return this.end(await interactionTurn(this.run, interaction.handler, interaction.instanceId));
  }

  append(messages: readonly ChatMessage[]): Finish | undefined {
    if (this.ended) return this.ended;
    const { run } = this;
    if (run.conversation.assistantTurns > 0) return this.end(appendEnvironment(run, messages));
    // Nothing sampled yet: the messages join the prompt (never masked), rendered again with it.
    run.conversation = openConversation(run.sample, run.ctx, [...run.conversation.messages, ...messages]);
    return undefined;
  }

  turnLimit(attemptedCall: boolean): Finish | undefined {
    const { run } = this;
    const multiTurn = run.ctx.rollout.multi_turn;
    if (multiTurn.max_assistant_turns !== null && run.conversation.assistantTurns >= multiTurn.max_assistant_turns) {
      return { status: "completed", reason: attemptedCall ? "max_assistant_turns" : "stop" };
    }
    const answers = attemptedCall || run.interaction !== undefined;
    if (multiTurn.max_user_turns !== null && run.log.userTurns >= multiTurn.max_user_turns && answers) {
      return { status: "completed", reason: "max_user_turns" };
    }
    return undefined;
  }

  runToolLoop(): Promise<Finish> {
    return toolAgentLoop(this);
  }

  /** Ends the trajectory with `finish` (unless a primitive already did) once the primitive in flight has settled. */
  async abandon(finish: Finish): Promise<Finish> {
    this.ended ??= finish;
    await Promise.allSettled(this.inFlight);
    return this.ended;
  }

  private track<T>(primitive: Promise<T>): Promise<T> {
    this.inFlight.add(primitive);
    const settled = () => void this.inFlight.delete(primitive);
    primitive.then(settled, settled);
    return primitive;
  }

  endWith(finish: Finish): Finish {
    this.ended ??= finish;
    return this.ended;
  }

  openSequence(messages: readonly ChatMessage[], tools: readonly ToolSchema[], templateKwargs?: Record<string, unknown>): { tooLong?: { length: number; limit: number } } {
    try {
      this.run.conversation = openConversation(this.run.sample, this.run.ctx, messages, tools, templateKwargs);
      return {};
    } catch (err) {
      if (!(err instanceof PromptTooLongError)) throw err;
      return { tooLong: { length: err.length, limit: err.limit } };
    }
  }

  recordAgentCalls(records: readonly ToolCallRecord[], toolSegment: boolean): void {
    this.run.log.calls.push(...records);
    if (toolSegment && records.length > 0) this.run.log.toolSegments.push(toolSegmentOf(records));
  }

  parseToolCallsOf(toolNames: readonly string[]): ParseResult | undefined {
    return this.ended ? undefined : parseToolCalls(this.run, toolNames);
  }

  private end(finish: Finish | undefined): Finish | undefined {
    if (finish && !this.ended) this.ended = finish;
    return finish;
  }
}
