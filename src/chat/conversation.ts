/**
 * The token record of one trajectory, built token-in/token-out: the tokens the engine saw, in order, and for each
 * token its loss mask (1 = sampled by the engine, 0 = anything else), its behaviour logprob, and its segment.
 *
 * Sampled tokens are appended as the engine returned them and never re-tokenized. Environment messages are appended
 * as the template's delta (see delta.ts), which includes the bridge the template writes after the end-of-turn token
 * (Qwen's "\n", verl PR #6921) with mask 0. The message list is kept beside the tokens only so that the drift check
 * can re-render it and say where the two disagree; it never rewrites a token.
 */
import { AgentrlError } from "../errors.js";
import { environmentDeltaText } from "./delta.js";
import { compareTokens, equalFrom, matchReport, type DriftMode, type DriftReport } from "./drift.js";
import type { ChatModel, EncodedText } from "./model.js";
import type { ChatMessage, ToolCall, ToolSchema } from "./messages.js";
import { TokenColumns } from "./token-columns.js";

export type SegmentKind = "prompt" | "assistant" | "tool" | "user";

/**
 * A run of tokens of one kind. `turn` counts exchanges: the prompt and the first assistant turn are turn 0; the
 * environment messages after assistant turn k and the assistant turn that answers them are turn k + 1.
 * `start`/`end` are token offsets, end exclusive.
 */
export interface Segment {
  kind: SegmentKind;
  turn: number;
  start: number;
  end: number;
}

export interface ExportedSegment extends Segment {
  text: string;
}

export interface ConversationExport {
  promptIds: number[];
  responseIds: number[];
  /** 1 exactly on tokens the engine sampled. */
  responseMask: number[];
  /** The engine's logprob for sampled tokens, 0 for mask-0 tokens. */
  responseLogprobs: number[];
  /** Response segments, offsets relative to the start of the response. */
  segments: ExportedSegment[];
  messages: ChatMessage[];
  assistantTurns: number;
  /** False when some sampled tokens came without logprobs (their logprob is recorded as 0). */
  logprobsComplete: boolean;
}

export interface ConversationOptions {
  tools?: readonly ToolSchema[];
  /** Extra template variables, e.g. `{ enable_thinking: false }`. */
  templateKwargs?: Record<string, unknown>;
  driftMode?: DriftMode;
  /** Called with a one-line message when the drift check finds drift. */
  warn?: (message: string) => void;
}

export interface SampledTurnInfo {
  /** The assistant content for the message list; defaults to the decoded sampled text. */
  content?: string;
  /** The calls parsed from the sampled text, for the message list that the drift check re-renders. */
  toolCalls?: ToolCall[];
  /** The whole message to record for this turn, replacing content and toolCalls (replaying a known conversation). */
  message?: ChatMessage;
}

export type EnvironmentAppend =
  | { appended: true; tokens: number }
  /** The delta would leave no room for another sampled token within maxResponseLength; nothing was appended. */
  | { appended: false; reason: "response_length"; tokens: number };

export interface DriftMetrics {
  checks: number;
  mismatches: number;
}

export class Conversation {
  readonly model: ChatModel;
  readonly tools: readonly ToolSchema[];
  readonly templateKwargs: Record<string, unknown>;
  readonly driftMode: DriftMode;
  readonly driftMetrics: DriftMetrics = { checks: 0, mismatches: 0 };
  lastDriftReport: DriftReport | undefined;

  /** The ids, loss mask and logprobs, a row per token (token-columns.ts). */
  private readonly columns: TokenColumns;
  private readonly segmentList: Segment[] = [];
  private readonly messageList: ChatMessage[] = [];
  private readonly warn: ((message: string) => void) | undefined;
  private readonly promptLengthValue: number;
  /** The rendered prompt and its ids: the drift check's render starts with it (encodeTail). */
  private readonly prompt: EncodedText;
  private assistantTurnCount = 0;
  /** True while the record ends with sampled tokens; false while it ends with a generation prompt. */
  private inAssistantTurn = false;
  private lastAssistantMessage: ChatMessage | undefined;
  private logprobsCompleteValue = true;

  private constructor(model: ChatModel, messages: readonly ChatMessage[], options: ConversationOptions) {
    if (messages.length === 0) throw new AgentrlError("a conversation needs at least one prompt message");
    this.model = model;
    this.tools = options.tools ?? [];
    this.templateKwargs = options.templateKwargs ?? {};
    this.driftMode = options.driftMode ?? "strict";
    this.warn = options.warn;
    this.messageList.push(...messages.map((message) => ({ ...message })));
    this.prompt = model.renderTokens(messages, this.renderOptions(true));
    // Room for 256 response tokens before the columns first double: a GSM8K trajectory's record fits, and a long
    // one doubles a few times, where a generous first size allocated ~17 KB outside the heap for every trajectory.
    const n = this.prompt.ids.length;
    this.columns = new TokenColumns(n + 256);
    this.columns.append(this.prompt.ids, 0, undefined);
    this.segmentList.push({ kind: "prompt", turn: 0, start: 0, end: n });
    this.checkInvariants();
    this.promptLengthValue = n;
  }

  /** Renders the prompt messages with the generation prompt: the tokens the first request sends. */
  static start(model: ChatModel, messages: readonly ChatMessage[], options: ConversationOptions = {}): Conversation {
    return new Conversation(model, messages, options);
  }

  /**
   * Appends tokens the engine sampled, EOS or end-of-turn token included, with mask 1. Consecutive calls extend the
   * same assistant turn (a continued or resumed generation).
   */
  appendSampled(ids: readonly number[], logprobs?: readonly number[], info: SampledTurnInfo = {}): void {
    // Index loops here and below: entries() makes a pair per token.
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (!Number.isInteger(id) || id < 0 || id >= this.model.embeddingSize) {
        throw new AgentrlError(`sampled token ${i} is ${id}, not an id of this model (vocabulary ${this.model.vocabSize}, embedding ${this.model.embeddingSize})`);
      }
    }
    if (logprobs !== undefined) {
      if (logprobs.length !== ids.length) {
        throw new AgentrlError(`got ${ids.length} sampled tokens but ${logprobs.length} logprobs`);
      }
      const bad = logprobs.findIndex((value) => typeof value !== "number" || Number.isNaN(value));
      if (bad >= 0) throw new AgentrlError(`logprob ${bad} of the sampled tokens is not a number`);
    } else if (ids.length > 0) {
      this.logprobsCompleteValue = false;
    }

    if (this.inAssistantTurn) {
      this.extendLast(ids, logprobs);
    } else {
      this.push({ kind: "assistant", turn: this.assistantTurnCount }, ids, 1, logprobs);
      this.assistantTurnCount += 1;
      this.inAssistantTurn = true;
      this.lastAssistantMessage = { role: "assistant", content: "" };
      this.messageList.push(this.lastAssistantMessage);
    }
    const message = this.lastAssistantMessage!;
    if (info.message) {
      for (const key of Object.keys(message)) delete message[key];
      Object.assign(message, info.message, { role: "assistant" });
      return;
    }
    message.content = info.content ?? this.lastAssistantText();
    if (info.toolCalls !== undefined) message.tool_calls = info.toolCalls;
  }

  /** Sets the parsed calls (and, when given, the text outside them) of the last assistant turn's message. */
  recordToolCalls(toolCalls: ToolCall[], content?: string): void {
    const message = this.lastAssistantMessage;
    if (!message) throw new AgentrlError("recordToolCalls needs a sampled assistant turn first");
    message.tool_calls = toolCalls;
    if (content !== undefined) message.content = content;
  }

  /** The token ids that appendEnvironment(messages) would append now, without appending them. */
  previewEnvironment(messages: readonly ChatMessage[]): number[] {
    if (!this.inAssistantTurn) {
      throw new AgentrlError("environment messages can only follow a sampled assistant turn");
    }
    if (messages.length === 0) throw new AgentrlError("appendEnvironment needs at least one message");
    const last = this.columns.lastId();
    // A turn cut short (length limit, stop string) has no end-of-turn token; the template's context has one.
    const closing = last !== undefined && this.model.endsTurn(last) ? [] : [this.model.endOfTurnTokenId];
    const delta = environmentDeltaText(this.model, messages, {
      tools: this.tools,
      templateKwargs: this.templateKwargs,
    });
    return [...closing, ...this.model.encode(delta)];
  }

  /**
   * Appends tool results or a user message: the bridge after the end-of-turn token, the rendered messages and the
   * next generation prompt, all mask 0. Pass every tool result of one assistant turn in a single call, as templates
   * group consecutive tool messages. With maxResponseLength, a delta that would leave no room for another sampled
   * token is not appended, and the result says so.
   */
  appendEnvironment(messages: readonly ChatMessage[], options: { maxResponseLength?: number } = {}): EnvironmentAppend {
    const ids = this.previewEnvironment(messages);
    if (options.maxResponseLength !== undefined && this.responseLength + ids.length >= options.maxResponseLength) {
      return { appended: false, reason: "response_length", tokens: ids.length };
    }
    const kind: SegmentKind = messages.every((message) => message.role === "tool") ? "tool" : "user";
    this.push({ kind, turn: this.assistantTurnCount }, ids, 0, undefined);
    this.messageList.push(...messages.map((message) => ({ ...message })));
    this.inAssistantTurn = false;
    this.lastAssistantMessage = undefined;
    return { appended: true, tokens: ids.length };
  }

  /** The ids of the last assistant turn, as sampled. */
  lastAssistantIds(): number[] {
    const segment = this.lastSegmentOf("assistant");
    return segment ? this.columns.idRange(segment.start, segment.end) : [];
  }

  /**
   * The last assistant turn as text, without its closing end-of-turn/EOS token. Other special tokens are kept (a
   * parser may need `<|python_tag|>`) unless skipSpecialTokens is set.
   */
  lastAssistantText(options: { skipSpecialTokens?: boolean } = {}): string {
    const ids = this.lastAssistantIds();
    const last = ids[ids.length - 1];
    const body = last !== undefined && this.model.endsTurn(last) ? ids.slice(0, -1) : ids;
    return this.model.decode(body, { skipSpecialTokens: options.skipSpecialTokens ?? false });
  }

  /** Re-renders the message list and compares it with the accumulated tokens. Records the result; never rewrites. */
  driftCheck(mode: DriftMode = this.driftMode): DriftReport {
    if (mode === "off") return compareTokens(this.model, this.columns.ids(), this.columns.ids(), "off");
    // Its new pieces are the sampled turns' text, encoded here once: kept in the cache, each would hold the whole
    // render it was sliced from until the cache starts over.
    const text = this.model.renderOnce(this.messageList, this.renderOptions(!this.inAssistantTurn));
    const { reused, tail } = this.model.encodeTail(this.prompt, text, { remember: false });
    const renderedTail = this.inAssistantTurn ? this.withoutTurnClosing(tail) : tail;
    const ids = this.columns.ids();
    // The render's first `reused` ids are the prompt's, which open the record: only what follows can differ. The whole
    // render is put together only to report a difference.
    const report = equalFrom(ids, reused, renderedTail)
      ? matchReport(mode, ids.length)
      : compareTokens(this.model, ids, [...this.prompt.ids.slice(0, reused), ...renderedTail], mode);
    this.driftMetrics.checks += 1;
    this.lastDriftReport = report;
    if (report.status === "drift") {
      this.driftMetrics.mismatches += 1;
      this.warn?.(
        `token drift at token ${report.firstDifference}: accumulated ${JSON.stringify(report.accumulatedExcerpt)} ` +
          `vs re-rendered ${JSON.stringify(report.renderedExcerpt)}`,
      );
    }
    return report;
  }

  export(): ConversationExport {
    this.checkInvariants();
    const p = this.promptLengthValue;
    return {
      promptIds: this.columns.idRange(0, p),
      responseIds: this.columns.idRange(p),
      responseMask: this.columns.maskRange(p),
      responseLogprobs: this.columns.logprobRange(p),
      segments: this.segmentList
        .filter((segment) => segment.kind !== "prompt")
        .map((segment) => ({
          ...segment,
          start: segment.start - p,
          end: segment.end - p,
          text: this.model.decode(this.columns.idRange(segment.start, segment.end)),
        })),
      messages: this.messages,
      assistantTurns: this.assistantTurnCount,
      logprobsComplete: this.logprobsCompleteValue,
    };
  }

  get totalLength(): number {
    return this.columns.length;
  }

  get promptLength(): number {
    return this.promptLengthValue;
  }

  get responseLength(): number {
    return this.columns.length - this.promptLengthValue;
  }

  get assistantTurns(): number {
    return this.assistantTurnCount;
  }

  /** True when the record ends with a generation prompt, i.e. the next step is a request to the engine. */
  get awaitingSample(): boolean {
    return !this.inAssistantTurn;
  }

  /**
   * The record's ids so far, as each request sends them: a view that does not follow later appends, and must not be
   * written to.
   */
  get tokenIds(): Int32Array {
    return this.columns.ids();
  }

  /** tokenIds as JSON list items (`1,2,3`) in ASCII bytes, printed once per token (token-columns.ts); a view. */
  get tokenIdsText(): Uint8Array {
    return this.columns.idsText();
  }

  /** The ids from `start` to `end` (default: the end of the record), as a plain array of their own. */
  idsBetween(start: number, end?: number): number[] {
    return this.columns.idRange(start, end);
  }

  get lossMask(): Uint8Array {
    return this.columns.mask();
  }

  get tokenLogprobs(): Float64Array {
    return this.columns.logprobs();
  }

  /** All segments, prompt included, with offsets into the whole sequence. */
  get segments(): readonly Segment[] {
    return this.segmentList.map((segment) => ({ ...segment }));
  }

  get messages(): ChatMessage[] {
    return this.messageList.map((message) => ({ ...message }));
  }

  /** A copy of the last message (the last assistant turn, once one is sampled), without copying the whole list. */
  get lastMessage(): ChatMessage {
    return { ...this.messageList[this.messageList.length - 1]! };
  }

  private renderOptions(addGenerationPrompt: boolean) {
    return { tools: this.tools, templateKwargs: this.templateKwargs, addGenerationPrompt };
  }

  /**
   * A render that ends with an assistant message also holds what the template writes to close it (the bridge, and the
   * end-of-turn token when the turn was cut short); the record cannot hold those yet, so they are not compared.
   */
  private withoutTurnClosing(rendered: number[]): number[] {
    const last = this.columns.lastId();
    const closing = [
      ...(last !== undefined && this.model.endsTurn(last) ? [] : [this.model.endOfTurnTokenId]),
      ...this.model.encode(this.model.bridgeText),
    ];
    if (closing.length === 0 || rendered.length < closing.length) return rendered;
    const tail = rendered.slice(rendered.length - closing.length);
    return tail.every((id, i) => id === closing[i]) ? rendered.slice(0, rendered.length - closing.length) : rendered;
  }

  private lastSegmentOf(kind: SegmentKind): Segment | undefined {
    return this.segmentList.findLast((segment) => segment.kind === kind);
  }

  private push(
    segment: Omit<Segment, "start" | "end">,
    ids: readonly number[],
    maskValue: 0 | 1,
    logprobs: readonly number[] | undefined,
  ): void {
    const index = this.segmentList.length;
    const start = this.columns.length;
    this.segmentList.push({ ...segment, start, end: start });
    this.appendTokens(index, ids, maskValue, logprobs);
  }

  private extendLast(ids: readonly number[], logprobs: readonly number[] | undefined): void {
    this.appendTokens(this.segmentList.length - 1, ids, 1, logprobs);
  }

  private appendTokens(
    segmentIndex: number,
    ids: readonly number[],
    maskValue: 0 | 1,
    logprobs: readonly number[] | undefined,
  ): void {
    this.columns.append(ids, maskValue, logprobs);
    this.segmentList[segmentIndex]!.end = this.columns.length;
    this.checkInvariants();
  }

  /** The segments tile the sequence (the columns keep one row per token by construction). A failure here is a bug. */
  private checkInvariants(): void {
    const n = this.columns.length;
    let cursor = 0;
    for (const segment of this.segmentList) {
      if (segment.start !== cursor || segment.end < segment.start) {
        throw new AgentrlError(
          `conversation invariant broken: segment ${segment.kind} starts at ${segment.start}, expected ${cursor}`,
        );
      }
      cursor = segment.end;
    }
    if (cursor !== n) throw new AgentrlError(`conversation invariant broken: segments end at ${cursor}, ${n} tokens`);
  }
}
