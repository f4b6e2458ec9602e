/**
 * One trajectory, turn by turn: the prompt, each assistant turn with its finish reason and its tool calls as
 * pretty JSON, each tool response (truncated unless --full) with its latency and error, each interaction turn,
 * then the reward with its parts. The segments are the spine (they are the token truth); the chat messages give
 * the clean text of prompt and interaction turns.
 */
import type { ToolCallRecord, Trajectory } from "../data/trajectory.js";
import { policyVersion } from "../data/version-spans.js";
import { fmt, painter, wrapText, type Look, type Painter } from "./output.js";

export interface ShowCall {
  name: string;
  /** Parsed arguments (the stored JSON text parsed back), or the text when it is not JSON. */
  arguments: unknown;
  response: string;
  latency_ms: number;
  step_reward: number | null;
  error_kind: string | null;
  error: string | null;
}

export type ShowTurn =
  | { kind: "prompt"; role: string; text: string }
  | { kind: "assistant"; turn: number; text: string; finish_reason: string | null; tokens: number; calls: ShowCall[] }
  | { kind: "tool"; turn: number; tokens: number; calls: ShowCall[]; text: string }
  | { kind: "user"; turn: number; tokens: number; text: string }
  | { kind: "bridge"; turn: number; tokens: number; text: string };

export interface ShowView {
  id: string;
  group: string;
  data_source: string;
  agent_loop: string | null;
  status: string;
  finish_reason: string;
  error: string | null;
  reward: {
    reward: number;
    score: number;
    tool_rewards: number[];
    turn_scores: number[];
    /** The tools' calc_reward at the end, `{tool_name: score}`; null when none was taken. */
    tool_scores: unknown;
    extra: unknown;
    advantage: number | null;
  };
  tokens: { prompt: number; response: number; sampled: number };
  turns: { assistant: number; user: number; tool_calls: number; tool_errors: number; parse_errors: number };
  drift: string;
  drift_detail: unknown;
  step: number | null;
  weight_version: string | null;
  /** Which weight version sampled which response tokens, [start, end); several within a turn after a preemption. */
  version_spans: Array<{ start: number; end: number; weight_version: string | null }>;
  timing_ms: { gen: number; tool: number; total: number };
  conversation: ShowTurn[];
}

interface Message {
  role?: string;
  content?: unknown;
}

/** `{calc_gsm8k_reward 1, other 0.5}`, or the JSON as it is when it is not a map of numbers. */
function toolScoresText(scores: unknown): string {
  if (scores === null || typeof scores !== "object" || Array.isArray(scores)) return JSON.stringify(scores);
  const entries = Object.entries(scores as Record<string, unknown>);
  return `{${entries.map(([name, v]) => `${name} ${typeof v === "number" ? fmt(v) : JSON.stringify(v)}`).join(", ")}}`;
}

function messageText(message: Message): string {
  if (typeof message.content === "string") return message.content;
  if (Array.isArray(message.content)) {
    return message.content.map((part) => (typeof part === "object" && part && "text" in part ? String(part.text) : "")).join("");
  }
  return message.content === undefined || message.content === null ? "" : JSON.stringify(message.content);
}

/** Removes chat-template markup (role headers, special tokens) from a segment's text, for display only. */
export function stripTemplate(text: string): string {
  return text
    .replace(/<\|im_start\|>[a-z]+\n?/g, "")
    .replace(/<\|start_header_id\|>[^<]*<\|end_header_id\|>\n*/g, "")
    .replace(/<\|[A-Za-z0-9_]+\|>/g, "")
    .replace(/<｜[^｜]*｜>/g, "")
    .trim();
}

function toShowCall(call: ToolCallRecord): ShowCall {
  return {
    name: call.name,
    arguments: call.arguments,
    response: call.response,
    latency_ms: call.latency_ms,
    step_reward: call.step_reward ?? null,
    error_kind: call.error_kind ?? null,
    error: call.error ?? null,
  };
}

/** The prompt messages, then one turn per response segment, each assistant turn with the calls it made. */
function conversationTurns(t: Trajectory, promptMessages: Message[], laterUserTexts: string[]): ShowTurn[] {
  const conversation: ShowTurn[] = promptMessages.map((m) => ({ kind: "prompt", role: m.role ?? "?", text: messageText(m) }));
  let assistantIndex = -1;
  let userIndex = 0;
  for (const segment of t.segments) {
    const tokens = segment.end - segment.start;
    switch (segment.kind) {
      case "prompt":
        break;
      case "assistant":
        assistantIndex += 1;
        conversation.push({
          kind: "assistant",
          turn: assistantIndex,
          text: stripTemplate(segment.text),
          finish_reason: segment.finish_reason ?? null,
          tokens,
          calls: t.calls.filter((c) => c.turn === assistantIndex).map(toShowCall),
        });
        break;
      case "tool":
        conversation.push({
          kind: "tool",
          turn: assistantIndex,
          tokens,
          calls: t.calls.filter((c) => c.turn === assistantIndex).map(toShowCall),
          text: stripTemplate(segment.text),
        });
        break;
      case "user":
        conversation.push({ kind: "user", turn: assistantIndex, tokens, text: laterUserTexts[userIndex++] ?? stripTemplate(segment.text) });
        break;
      case "bridge":
        conversation.push({ kind: "bridge", turn: assistantIndex, tokens, text: segment.text });
        break;
    }
  }
  return conversation;
}

export function buildShowView(t: Trajectory): ShowView {
  const messages: Message[] = t.messages;
  const firstAssistant = messages.findIndex((m) => m.role === "assistant");
  const promptMessages = firstAssistant < 0 ? messages : messages.slice(0, firstAssistant);
  // Interaction turns are the user messages after the prompt, in order.
  const laterUserTexts = (firstAssistant < 0 ? [] : messages.slice(firstAssistant)).filter((m) => m.role === "user").map(messageText);

  const conversation = conversationTurns(t, promptMessages, laterUserTexts);
  let sampled = 0;
  for (const m of t.response_mask) sampled += m;
  return {
    id: t.id,
    group: t.group_id,
    data_source: t.data_source,
    agent_loop: t.agent_loop ?? null,
    status: t.status,
    finish_reason: t.finish_reason,
    error: t.error ?? null,
    reward: {
      reward: t.reward,
      score: t.score,
      tool_rewards: t.tool_rewards,
      turn_scores: t.turn_scores,
      tool_scores: t.tool_scores ?? null,
      extra: t.reward_extra ?? null,
      advantage: t.advantage ?? null,
    },
    tokens: { prompt: t.prompt_ids.length, response: t.response_ids.length, sampled },
    turns: {
      assistant: t.assistant_turns,
      user: t.user_turns,
      tool_calls: t.tool_calls,
      tool_errors: t.tool_errors,
      parse_errors: t.parse_errors,
    },
    drift: t.drift,
    drift_detail: t.drift_detail ?? null,
    step: t.step ?? null,
    weight_version: t.weight_version ?? null,
    version_spans: t.version_spans ?? [],
    timing_ms: { gen: t.gen_ms, tool: t.tool_ms, total: t.total_ms },
    conversation,
  };
}

export interface ShowOptions {
  /** Show tool responses and prompts whole. */
  full: boolean;
  /** Characters of a tool response or prompt message shown when not --full. */
  maxChars: number;
}

function truncate(text: string, options: ShowOptions, p: Painter): string {
  if (options.full || text.length <= options.maxChars) return text;
  const hidden = text.length - options.maxChars;
  return `${text.slice(0, options.maxChars)}${p.dim(`… [${hidden} more characters; --full shows all]`)}`;
}

const ROLE_COLOR: Record<string, keyof Painter> = {
  system: "gray",
  user: "blue",
  assistant: "green",
  tool: "yellow",
  interaction: "cyan",
};

export function renderShow(view: ShowView, look: Look, options: ShowOptions): string {
  const p = painter(look);
  const out: string[] = [];
  const say = (line: string) => out.push(wrapText(line, look.width));
  const rule = (label: string, color: keyof Painter) => {
    const text = `── ${label} `;
    return p[color](p.bold(text + "─".repeat(Math.max(0, Math.min(look.width, 100) - text.length))));
  };
  const statusColor = view.status === "completed" ? p.green : view.status === "failed" ? p.red : p.yellow;
  out.push(
    `${p.bold(`trajectory ${view.id}`)}  group ${view.group}  ${view.data_source}${view.agent_loop ? `  loop ${view.agent_loop}` : ""}  status ${statusColor(view.status)}  finish ${p.bold(view.finish_reason)}`,
  );
  if (view.error) out.push(p.red(`error: ${view.error}`));
  say(
    `turns: ${view.turns.assistant} assistant, ${view.turns.user} tool/user · tool calls ${view.turns.tool_calls} ` +
      `(${view.turns.tool_errors} tool errors, ${view.turns.parse_errors} parse errors) · tokens: prompt ${view.tokens.prompt}, ` +
      `response ${view.tokens.response} (${view.tokens.sampled} sampled) · drift ${view.drift === "drift" ? p.yellow(view.drift) : view.drift}` +
      (view.step !== null ? ` · step ${view.step}` : "") +
      (view.weight_version ? ` · weights ${view.weight_version}` : ""),
  );
  const versions = versionsLine(view);
  if (versions) say(versions);

  for (const turn of view.conversation) {
    switch (turn.kind) {
      case "prompt": {
        const color = ROLE_COLOR[turn.role] ?? "blue";
        out.push(rule(`prompt · ${turn.role}`, color));
        out.push(wrapText(truncate(turn.text, options, p), look.width));
        break;
      }
      case "assistant": {
        out.push(rule(`assistant · turn ${turn.turn} · ${turn.tokens} tokens · finish ${turn.finish_reason ?? "?"}`, "green"));
        out.push(wrapText(turn.text, look.width));
        for (const call of turn.calls) {
          const label = call.error_kind?.startsWith("parse:")
            ? p.red(`✗ tool call ${call.name || "(unparsed)"}: ${call.error_kind} — ${call.error ?? ""}`)
            : p.yellow(`→ tool call ${call.name}`);
          out.push(`  ${label}`);
          if (!call.error_kind?.startsWith("parse:")) out.push(indent(JSON.stringify(call.arguments, null, 2), "    "));
        }
        break;
      }
      case "tool": {
        out.push(rule(`tool · ${turn.tokens} tokens`, "yellow"));
        if (turn.calls.length === 0) out.push(wrapText(truncate(turn.text, options, p), look.width));
        for (const call of turn.calls) {
          const status = call.error_kind ? p.red(`error ${call.error_kind}`) : p.green("ok");
          const reward = call.step_reward === null ? "" : ` · step reward ${fmt(call.step_reward)}`;
          out.push(`${p.yellow(call.name || "(unparsed)")} · ${status} · ${fmt(call.latency_ms, 1)} ms${reward}`);
          out.push(wrapText(truncate(call.response, options, p), look.width, "  "));
        }
        break;
      }
      case "user":
        out.push(rule(`user (interaction) · after turn ${turn.turn} · ${turn.tokens} tokens`, "cyan"));
        out.push(wrapText(turn.text, look.width));
        break;
      case "bridge":
        break;
    }
  }
  out.push(rule("reward", "magenta"));
  const r = view.reward;
  const parts = [
    `score ${fmt(r.score)}`,
    r.tool_rewards.length ? `tool rewards [${r.tool_rewards.map((x) => fmt(x)).join(", ")}]` : null,
    r.turn_scores.length ? `turn scores [${r.turn_scores.map((x) => fmt(x)).join(", ")}]` : null,
    r.extra !== null ? `extra ${JSON.stringify(r.extra)}` : null,
  ].filter((x): x is string => x !== null);
  say(`${p.bold(`reward ${fmt(r.reward)}`)} (${parts.join(" · ")})${r.advantage !== null ? ` · advantage ${fmt(r.advantage)}` : ""}`);
  if (r.tool_scores !== null) say(`tool scores ${toolScoresText(r.tool_scores)} (calc_reward at the end)`);
  out.push(`finish reason: ${view.finish_reason} · status ${view.status}`);
  out.push(p.dim(`time: generation ${fmt(view.timing_ms.gen, 0)} ms · tools ${fmt(view.timing_ms.tool, 1)} ms · total ${fmt(view.timing_ms.total, 0)} ms`));
  if (view.drift === "drift" && view.drift_detail) say(p.yellow(`drift detail: ${JSON.stringify(view.drift_detail)}`));
  return out.join("\n");
}

function indent(text: string, prefix: string): string {
  return text
    .split("\n")
    .map((line) => prefix + line)
    .join("\n");
}

/**
 * The weight versions that sampled the response, when more than one did (a partial rollout continued across a
 * weight update): `sampled by weights default (tokens 0–37), 1 (37–80)`, with the staleness when the step is known.
 */
function versionsLine(view: ShowView): string | null {
  const versions = new Set(view.version_spans.map((s) => s.weight_version));
  if (versions.size < 2) return null;
  const spans = view.version_spans.map((s) => `${s.weight_version ?? "?"} (${s.start}–${s.end})`).join(", ");
  let staleness = "";
  if (view.step !== null) {
    const versions = view.version_spans.map((s) => policyVersion(s.weight_version));
    const lags = versions.flatMap((v) => (v === null ? [] : [view.step! - 1 - v]));
    if (lags.length === versions.length) staleness = ` · staleness ${Math.min(...lags)}–${Math.max(...lags)} versions at step ${view.step}`;
  }
  return `sampled by weights ${spans} (continued across a weight update)${staleness}`;
}
