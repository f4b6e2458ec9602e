/**
 * One trajectory seen through the gateway: each chat-completion request of its agent extends the trajectory's token
 * record (or opens a new segment, history.ts), samples one assistant turn token-in/token-out through the same
 * primitives every agent loop uses, and answers with that turn parsed into OpenAI's message shape. Requests of one
 * trajectory run one at a time, in arrival order.
 */
import { ResponseChain } from "./responses-api.js";
import { LruMap } from "../lru-map.js";
import { mapPacked } from "../packed-list.js";
import { freezeTemplateValue, type ChatMessage, type Conversation, type ToolCall, type ToolSchema } from "../chat/index.js";
import type { TopLogprob } from "../engine/index.js";
import type { TrajectoryControl } from "../rollout/agent-loop.js";
import type { ClosedSegment, Finish, ToolSegmentMeta, TrajectoryInFlight } from "../rollout/trajectory-state.js";
import { messageKey, planHistory, splitReasoning, toolsKey, type HistoryPlan } from "./history.js";
import { GatewayError, ignoredFields, refuseNonTextParts, responseFormatGrammar, toChatMessage, type ChatCompletionRequest } from "./openai-schema.js";

/** The assistant turn a request produced, in OpenAI's terms. */
export interface Completion {
  id: string;
  content: string | null;
  toolCalls: Array<{ id: string; type: "function"; function: { name: string; arguments: string } }>;
  finishReason: "stop" | "tool_calls" | "length";
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  /** Each sampled token's log-prob, when the request asked for them (`logprobs: true`). */
  logprobs?: TokenLogprob[];
  /** The turn's think block, apart from `content` (reasoning_content). */
  reasoning?: string;
}

/** OpenAI's log-prob entry: the token's text and bytes, its log-prob under the sampler, and the alternatives asked for. */
export interface TokenLogprob extends TokenAlternative {
  top_logprobs: TokenAlternative[];
}

/** One of the most likely tokens at a position (`top_logprobs`), as OpenAI writes it. */
export interface TokenAlternative {
  token: string;
  logprob: number;
  bytes: number[];
}

/** A call of the last reply whose result the agent has not sent yet. */
interface PendingCall {
  id: string;
  name: string;
  arguments: string;
  turn: number;
  repliedAt: number;
}

/** A segment's match keys and per-sequence facts, kept while another segment is current. */
interface SegmentState {
  keys: string[];
  tools: string;
  kwargs: string;
  toolSegments: ToolSegmentMeta[];
  pendingCalls: PendingCall[];
}

/** Once-per-run notes (the trainer's sampling settings winning over the agent's, fields ignored). */
export type NoteOnce = (key: string, message: string) => void;

/**
 * What a `response_format` (or the Responses API's `text.format`) does: `constrain` sends its JSON schema to the
 * engine's grammar-constrained decoding, `sample` samples as without one (the agent loop's `response_format`).
 */
export type ResponseFormatPolicy = "constrain" | "sample";

export class GatewaySession {
  /** True once a request has rendered the agent's own prompt in place of the row's. */
  private started = false;
  private requests = 0;
  /** Requests wait here for the one before them. */
  private queue: Promise<unknown> = Promise.resolve();
  /** messageKey of each of the record's messages, and toolsKey of its tools: what the next request is matched on. */
  private recordKeys: string[] = [];
  private recordTools = "";
  /** The chat_template_kwargs the record was rendered with, as JSON: other ones start a new segment. */
  private recordKwargs = "{}";
  /** The last request's tools as sent, and what they are known as: agents resend the same list with every request. */
  private lastTools: { tools: unknown; known: KnownTools } | undefined;
  /** The calls of the last reply, for the record's `calls` once their results come back. */
  private pendingCalls: PendingCall[] = [];
  /** What each segment this session closed needs to be extended again, should a later request continue it. */
  private readonly parked = new Map<ClosedSegment, SegmentState>();
  /** The Responses API's responses that a later request of this trajectory may continue (previous_response_id). */
  readonly responses = new ResponseChain();

  constructor(
    readonly key: string,
    private readonly api: TrajectoryControl,
    private readonly run: TrajectoryInFlight,
    private readonly note: NoteOnce,
    private readonly responseFormat: ResponseFormatPolicy = "constrain",
  ) {}

  get trajectoryId(): string {
    return this.run.id;
  }

  get ended(): Finish | undefined {
    return this.api.ended;
  }

  complete(request: ChatCompletionRequest, body: Record<string, unknown>): Promise<Completion> {
    const next = this.queue.then(() => this.completeNow(request, body));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async completeNow(request: ChatCompletionRequest, body: Record<string, unknown>): Promise<Completion> {
    this.checkOpen();
    this.checkSupported(request, body);
    const messages = mapPacked(request.messages, toChatMessage);
    if (messages.at(-1)!.role === "assistant") {
      throw new GatewayError(400, "the last message is an assistant message: continuing a prefilled assistant turn is not supported", "unsupported_prefill", "messages");
    }
    const tools: ToolSchema[] = request.tools ?? [];
    // Before the record changes: a response_format or chat_template_kwargs refused here leaves it as it was.
    const grammar = this.grammarOf(request, tools);
    const templateKwargs = templateKwargsOf(body);
    this.extendRecord(messages, this.knownToolsOf(tools), templateKwargs);
    const limit = this.turnLimit();
    if (limit) {
      this.api.endWith(limit);
      this.checkOpen();
    }
    const cap = request.max_completion_tokens ?? request.max_tokens ?? undefined;
    const stop = request.stop == null ? undefined : typeof request.stop === "string" ? [request.stop] : request.stop;
    const promptTokens = this.run.conversation.totalLength;
    // checkSupported refused alternatives without logprobs: true.
    const top = request.top_logprobs ?? 0;
    const generated = await this.api.generate({
      ...(cap ? { maxNewTokens: cap } : {}),
      ...(stop ? { stop } : {}),
      ...(grammar ? { jsonSchema: grammar } : {}),
      ...(top > 0 ? { topLogprobs: top } : {}),
    });
    if (generated.finish && generated.ids.length === 0) this.checkOpen({ endedHere: true });
    const lengthCut = generated.finishReason === "length" || generated.finish?.reason === "length";
    const calls = this.parseCalls(request, tools, lengthCut);
    const message = this.run.conversation.lastMessage;
    this.recordKeys.push(messageKey(message));
    const text = typeof message.content === "string" ? message.content : "";
    // The think block goes apart (reasoning_content), as SGLang's and vLLM's reasoning parsers give it, unless the
    // request says separate_reasoning: false (their request field).
    const { reasoning, answer } = body.separate_reasoning === false ? { reasoning: undefined, answer: text } : splitReasoning(text);
    const content = answer !== "" ? answer : null;
    const turn = this.run.conversation.assistantTurns - 1;
    // Unique within the conversation, which is all OpenAI's ids promise; the same across trajectories, so a tool
    // result's render (which holds its tool_call_id) can come from the template cache as the built-in loop's does.
    const toolCalls = mapPacked(calls, (call, index) => ({ id: `call_${turn}_${index}`, type: "function" as const, function: { name: call.function.name, arguments: JSON.stringify(call.function.arguments) } }));
    this.pendingCalls = mapPacked(toolCalls, (call) => ({ id: call.id, name: call.function.name, arguments: call.function.arguments, turn, repliedAt: performance.now() }));
    return {
      ...(request.logprobs ? { logprobs: this.sampledLogprobs(promptTokens, generated.topLogprobs) } : {}),
      ...(reasoning !== undefined ? { reasoning } : {}),
      id: `chatcmpl-${this.key.slice(0, 12)}-${++this.requests}`,
      content: toolCalls.length > 0 || content !== null ? content : "",
      toolCalls,
      finishReason: lengthCut ? "length" : toolCalls.length > 0 ? "tool_calls" : "stop",
      usage: { prompt_tokens: promptTokens, completion_tokens: generated.ids.length, total_tokens: promptTokens + generated.ids.length },
    };
  }

  /**
   * The log-probs of the tokens sampled since `from`, as the engine reported them: every token of the turn, the
   * tool-call markup included, the end-of-turn token that closes it not (it is no part of the reply's text). `top`
   * holds the engine's alternatives per sampled token, when the request asked for them.
   */
  private sampledLogprobs(from: number, top: readonly TopLogprob[][] | undefined): TokenLogprob[] {
    const { conversation, ctx } = this.run;
    let ids = conversation.idsBetween(from);
    if (ids.length > 0 && ctx.model.endsTurn(ids.at(-1)!)) ids = ids.slice(0, -1);
    const logprobs = conversation.tokenLogprobs;
    const entry = (id: number, logprob: number): TokenAlternative => ({ token: ctx.model.decode([id]), logprob, bytes: ctx.model.tokenBytes(id) });
    return ids.map((id, i) => ({ ...entry(id, logprobs[from + i]!), top_logprobs: (top?.[i] ?? []).map((alt) => entry(alt.id, alt.logprob)) }));
  }

  /**
   * A trajectory that has ended takes no more requests: 409, naming how it ended. The request during which the
   * model's server failed it is a 502; every later one a 409 like any ended trajectory's, which no client retries
   * (LangChain's ChatOpenAI retries a 5xx six times over a minute and more, whatever the answer says).
   */
  private checkOpen({ endedHere = false }: { endedHere?: boolean } = {}): void {
    const ended = this.api.ended;
    if (!ended) return;
    const status = ended.status === "failed" && endedHere ? 502 : 409;
    const why = `${ended.status} (${ended.reason}${ended.error ? `: ${ended.error}` : ""})`;
    throw new GatewayError(status, `trajectory ${this.run.id} has ended: ${why}; it takes no more requests`, "trajectory_ended");
  }

  /** Refuses what the gateway cannot do faithfully; notes once per run what it overrides or ignores. */
  private checkSupported(request: ChatCompletionRequest, body: Record<string, unknown>): void {
    if (request.n != null && request.n !== 1) throw new GatewayError(400, `n=${request.n}: the gateway samples one choice per request (each trajectory is one sample)`, "unsupported_parameter", "n");
    if (request.top_logprobs && !request.logprobs) {
      // OpenAI's own rule: alternatives come with the sampled tokens' log-probs or not at all.
      throw new GatewayError(400, `top_logprobs=${request.top_logprobs} needs logprobs: true`, "invalid_request", "top_logprobs");
    }
    refuseNonTextParts(request.messages);
    const { rollout, greedy } = this.run.ctx;
    const temperature = greedy ? 0 : rollout.temperature;
    const topP = greedy ? 1 : rollout.top_p;
    if (request.temperature != null && request.temperature !== temperature) {
      this.note("temperature", `gateway: the agent asks for temperature ${request.temperature}; the trainer's ${temperature} samples (actor_rollout_ref.rollout.temperature)`);
    }
    if (request.top_p != null && request.top_p !== topP) {
      this.note("top_p", `gateway: the agent asks for top_p ${request.top_p}; the trainer's ${topP} samples (actor_rollout_ref.rollout.top_p)`);
    }
    this.noteIgnored(ignoredFields(body));
  }

  /**
   * The turn's grammar (JSON-schema text) from its response_format, or none: not when the model may call a tool this
   * turn (a grammar for the answer would forbid the call; OpenAI applies the format to the final answer only), and not
   * under `response_format: sample`. Each of those is noted once per run.
   */
  private grammarOf(request: ChatCompletionRequest, tools: readonly ToolSchema[]): string | undefined {
    const grammar = responseFormatGrammar(request.response_format);
    if (grammar === undefined) return undefined;
    if (tools.length > 0 && request.tool_choice !== "none") {
      this.note("response_format:tools", "gateway: a response_format with tools is sampled without its grammar, which would forbid the tool calls; the answer is returned as sampled");
      return undefined;
    }
    if (this.responseFormat === "sample") {
      this.note("response_format:sample", "gateway: response_format is not enforced (the agent loop's response_format: sample); the answer is returned as sampled");
      return undefined;
    }
    return grammar;
  }

  /** Notes, once per run each, request fields the gateway reads and does not act on. */
  noteIgnored(fields: readonly string[]): void {
    for (const field of fields) this.note(`field:${field}`, `gateway: the request field ${field} is ignored (docs/openai-gateway.md)`);
  }

  /** Brings the record up to the request's messages: the agent's prompt first, then deltas, or a new segment. */
  private extendRecord(messages: ChatMessage[], tools: KnownTools, templateKwargs: Record<string, unknown> | undefined): void {
    const keys = mapPacked(messages, messageKey);
    if (!this.started) {
      // Started only once a prompt fits: a refused first request leaves the row's prompt for the next one to replace.
      this.openSegment(messages, tools, keys, templateKwargs);
      this.started = true;
      return;
    }
    const kwargsKey = JSON.stringify(templateKwargs ?? {});
    const plan: HistoryPlan = kwargsKey !== this.recordKwargs
      ? { kind: "restart", reason: "chat_template_kwargs_changed" }
      : planHistory(this.recordKeys, this.recordTools, messages, keys, tools.key);
    let added: ChatMessage[];
    if (plan.kind === "extend") {
      added = plan.added;
    } else {
      const resumable = this.resumableSegment(messages, keys, tools.key, kwargsKey);
      if (!resumable) {
        // Opened first: a request refused for its length changes nothing, and the current segment stays open.
        const previous = this.run.conversation;
        const state = this.segmentState();
        this.openSegment(messages, tools, keys, templateKwargs);
        return this.closeSegment(previous, plan.reason, state);
      }
      this.resume(resumable.segment, plan.reason);
      added = resumable.added;
    }
    const ended = this.api.append(added);
    if (ended) this.checkOpen();
    this.recordKeys.push(...keys.slice(this.recordKeys.length));
    this.recordCallResults(added);
  }

  /**
   * A segment this session closed that the request extends, the latest first: an agent that went back to an earlier
   * conversation (a sub-agent's detour, one of several conversations it interleaves) continues that one's record.
   */
  private resumableSegment(messages: readonly ChatMessage[], keys: readonly string[], toolsKeyValue: string, kwargsKey: string): { segment: ClosedSegment; added: ChatMessage[] } | undefined {
    const closed = this.run.closedSegments ?? [];
    for (let i = closed.length - 1; i >= 0; i--) {
      const state = this.parked.get(closed[i]!);
      if (!state || state.kwargs !== kwargsKey) continue;
      const plan = planHistory(state.keys, state.tools, messages, keys, toolsKeyValue);
      if (plan.kind === "extend") return { segment: closed[i]!, added: plan.added };
    }
    return undefined;
  }

  /** Makes a closed segment current again, closing the current one (kept when anything was sampled in it) for `reason`. */
  private resume(segment: ClosedSegment, reason: string): void {
    const { run } = this;
    const state = this.parked.get(segment)!;
    this.parked.delete(segment);
    run.closedSegments = run.closedSegments!.filter((other) => other !== segment);
    this.closeSegment(run.conversation, reason, this.segmentState());
    run.conversation = segment.conversation;
    run.log.assistantFinish = segment.assistantFinish;
    run.log.versionSpans = segment.versionSpans;
    run.log.toolSegments = state.toolSegments;
    this.recordKeys = state.keys;
    this.recordTools = state.tools;
    this.recordKwargs = state.kwargs;
    this.pendingCalls = state.pendingCalls;
  }

  private segmentState(): SegmentState {
    return { keys: this.recordKeys, tools: this.recordTools, kwargs: this.recordKwargs, toolSegments: this.run.log.toolSegments, pendingCalls: this.pendingCalls };
  }

  private knownToolsOf(tools: ToolSchema[]): KnownTools {
    // Compared in place, key order included (as their JSON text would be), without serialising them per request.
    if (!this.lastTools || !sameJson(tools, this.lastTools.tools)) this.lastTools = { tools, known: knownTools(tools) };
    return this.lastTools.known;
  }

  /**
   * The agent ran the calls of the last reply itself: their results (tool messages, matched by tool_call_id, else in
   * order) go into the record's calls, with the time the agent took as their latency.
   */
  private recordCallResults(added: readonly ChatMessage[]): void {
    const results = added.filter((message) => message.role === "tool");
    if (results.length === 0 || this.pendingCalls.length === 0) return;
    const now = performance.now();
    const records = results.flatMap((message, index) => {
      const call = this.pendingCalls.find((pending) => pending.id === message.tool_call_id) ?? this.pendingCalls[index];
      if (!call) return [];
      const response = typeof message.content === "string" ? message.content : JSON.stringify(message.content ?? "");
      // The record keeps the arguments as the object they were sent as text of.
      return [{ turn: call.turn, name: call.name, arguments: JSON.parse(call.arguments) as Record<string, unknown>, response, latency_ms: now - call.repliedAt, step_reward: null, error_kind: null, error: null }];
    });
    this.pendingCalls = [];
    this.api.recordAgentCalls(records, results.length === added.length);
  }

  /** Renders the request as the trajectory's new current segment (mask 0 throughout: nothing in it was sampled). */
  private openSegment(messages: ChatMessage[], tools: KnownTools, keys: string[], templateKwargs: Record<string, unknown> | undefined): void {
    const { tooLong } = this.api.openSequence(messages, tools.frozen, templateKwargs);
    if (tooLong) {
      throw new GatewayError(400, `the rendered prompt has ${tooLong.length} tokens, over data.max_prompt_length=${tooLong.limit}`, "context_length_exceeded", "messages");
    }
    this.recordKeys = keys;
    this.recordTools = tools.key;
    this.recordKwargs = JSON.stringify(templateKwargs ?? {});
  }

  /**
   * Keeps `previous` (when anything was sampled in it) with its own per-turn facts, which start over, and what a later
   * request needs to continue it (`state`).
   */
  private closeSegment(previous: Conversation, reason: string, state: SegmentState): void {
    const { run } = this;
    this.pendingCalls = [];
    if (previous.assistantTurns > 0) {
      const closed: ClosedSegment = { conversation: previous, reason, assistantFinish: run.log.assistantFinish, versionSpans: run.log.versionSpans };
      (run.closedSegments ??= []).push(closed);
      this.parked.set(closed, state);
    }
    run.log.assistantFinish = [];
    run.log.versionSpans = [];
    // The tool segments' facts are per sequence (the record lists the main one's segments); the calls stay.
    run.log.toolSegments = [];
  }

  /** max_assistant_turns counts the turns of every segment of the episode. */
  private turnLimit(): Finish | undefined {
    const max = this.run.ctx.rollout.multi_turn.max_assistant_turns;
    if (max === null) return undefined;
    const turns = (this.run.closedSegments ?? []).reduce((sum, segment) => sum + segment.conversation.assistantTurns, this.run.conversation.assistantTurns);
    return turns >= max ? { status: "completed", reason: "max_assistant_turns" } : undefined;
  }

  /** The turn's calls, parsed with the configured parser against the request's tools (none with tool_choice none). */
  private parseCalls(request: ChatCompletionRequest, tools: ToolSchema[], truncated: boolean): ToolCall[] {
    if (truncated || tools.length === 0 || request.tool_choice === "none") return [];
    const names = tools.map((tool) => (tool as { function: { name: string } }).function.name);
    const parsed = this.api.parseToolCallsOf(names);
    if (!parsed || parsed.calls.length === 0) return [];
    const chosen = request.tool_choice;
    if (chosen && typeof chosen === "object" && parsed.calls.some((call) => call.name !== chosen.function.name)) {
      this.note("tool_choice", `gateway: tool_choice names ${chosen.function.name}, but the model called other tools too; they are returned as sampled (there is no constrained decoding)`);
    }
    return this.run.conversation.lastMessage.tool_calls ?? [];
  }
}

/**
 * A request's `chat_template_kwargs` (the SGLang and vLLM servers' extension, e.g. `{"enable_thinking": false}`):
 * template variables for this trajectory's renders, over the run's data.apply_chat_template_kwargs.
 */
function templateKwargsOf(body: Record<string, unknown>): Record<string, unknown> | undefined {
  const kwargs = body.chat_template_kwargs;
  if (kwargs === undefined || kwargs === null) return undefined;
  if (typeof kwargs !== "object" || Array.isArray(kwargs)) {
    throw new GatewayError(400, "chat_template_kwargs must be an object of template variables", "invalid_request", "chat_template_kwargs");
  }
  return kwargs as Record<string, unknown>;
}

/** Two parsed JSON values are the same text: the same keys in the same order, the same values. */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null || Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === (b as unknown[]).length && a.every((value, i) => sameJson(value, (b as unknown[])[i]));
  const keys = Object.keys(a);
  const otherKeys = Object.keys(b);
  if (keys.length !== otherKeys.length) return false;
  return keys.every((key, i) => key === otherKeys[i] && sameJson((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]));
}

/** A request's tools as a session uses them: their key (history.ts's toolsKey) and the frozen list the template prints. */
interface KnownTools {
  key: string;
  frozen: ToolSchema[];
}

/** Tool lists seen by any trajectory, by their exact JSON text (key order included, as the template prints it). */
const knownToolLists = new LruMap<string, KnownTools>(16);

/**
 * The key and the frozen list of `tools`, made once per distinct list: agents send the same tools with every request
 * of every trajectory. The template prints a frozen value once (jinja-values.ts's freezeTemplateValue) where it
 * printed the schemas into each segment's prompt, deltas and drift check, and the key's canonical JSON was a tenth of
 * a first request's CPU.
 */
function knownTools(tools: ToolSchema[]): KnownTools {
  const text = JSON.stringify(tools);
  let known = knownToolLists.get(text);
  if (known === undefined) {
    known = { key: toolsKey(tools), frozen: freezeTemplateValue(tools) };
    knownToolLists.set(text, known);
  }
  return known;
}

/** The frozen list equal to `tools`, down to key order (knownTools). */
export function frozenToolList(tools: ToolSchema[]): ToolSchema[] {
  return knownTools(tools).frozen;
}
