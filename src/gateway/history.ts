/**
 * The segment rule: does a request's message list extend the token record, or start a new segment? A request extends
 * the record when the record's messages are, message for message, its first messages (the assistant turns the
 * gateway produced, the environment messages appended before), the tools are the same, and what follows is only
 * environment messages (user, tool, system). Anything else (an edited, dropped or reordered message, a summarised
 * context, an assistant message the model never sampled, other tools) starts a new segment: its tokens are rendered
 * from the request, never spliced into the old ones (docs/openai-gateway.md).
 */
import type { ChatMessage, ToolSchema } from "../chat/index.js";
import { contentText } from "./openai-schema.js";
import { fromJsonText } from "../data/trajectory-encoding.js";
import { mapPacked } from "../packed-list.js";

export type HistoryPlan =
  /** Append `added` (mask 0) after the record, then sample. */
  | { kind: "extend"; added: ChatMessage[] }
  /** Close the record's segment and render the request as a new one; `reason` says why, for the record. */
  | { kind: "restart"; reason: string };

/**
 * What makes two messages the same turn: the role, the text, and the calls by name and arguments. Call ids, a tool
 * message's name, argument formatting and key order are the agent's business and do not count.
 */
export function messageKey(message: ChatMessage): string {
  const calls = message.tool_calls?.length ? canonical(mapPacked(message.tool_calls, (call) => [call.function.name, fromJsonText(call.function.arguments)])) : "";
  const role = message.role === "developer" ? "system" : message.role;
  // An assistant turn is the same turn whether the agent sends its reasoning back or not (the reply gave it apart).
  const text = role === "assistant" ? splitReasoning(contentText(message.content)).answer : contentText(message.content);
  // Joined, not serialised: the text is most of a key and is compared, never escaped. Neither a role nor JSON text
  // holds a NUL, so the first two split the key unambiguously.
  return `${role}\u0000${calls}\u0000${text}`;
}

const THINK_START = "<think>";
const THINK_END = "</think>";

/**
 * A turn's text as reasoning parsers split it: what comes before the first `</think>` (without a leading `<think>`;
 * templates that open the block in the generation prompt leave it out of the turn) and the answer after it. No
 * `</think>`: no reasoning, the whole text is the answer.
 */
export function splitReasoning(text: string): { reasoning?: string; answer: string } {
  const end = text.indexOf(THINK_END);
  if (end < 0) return { answer: text };
  const before = text.slice(0, end).trimStart();
  const reasoning = (before.startsWith(THINK_START) ? before.slice(THINK_START.length) : before).trim();
  return { reasoning, answer: text.slice(end + THINK_END.length).trimStart() };
}

/** The tools' key: the same list (in order) with the same schemas. */
export function toolsKey(tools: readonly ToolSchema[]): string {
  return canonical(tools);
}

/**
 * `recordKeys` and `recordTools` are the record's messages' and tools' keys (messageKey, toolsKey), kept by the
 * caller as the record grows, so a request costs the keys of its own messages only.
 */
export function planHistory(
  recordKeys: readonly string[],
  recordTools: string,
  request: readonly ChatMessage[],
  requestKeys: readonly string[],
  requestTools: string,
): HistoryPlan {
  if (recordTools !== requestTools) return { kind: "restart", reason: "tools_changed" };
  const shared = Math.min(recordKeys.length, requestKeys.length);
  for (let i = 0; i < shared; i++) {
    if (recordKeys[i] !== requestKeys[i]) return { kind: "restart", reason: `message ${i} (${request[i]!.role}) differs from the record's` };
  }
  if (request.length <= recordKeys.length) return { kind: "restart", reason: `${recordKeys.length - request.length + 1} message(s) of the record dropped` };
  const added = request.slice(recordKeys.length);
  const assistant = added.findIndex((message) => message.role === "assistant");
  if (assistant >= 0) return { kind: "restart", reason: `message ${recordKeys.length + assistant} is an assistant turn the model did not sample` };
  return { kind: "extend", added };
}

/**
 * JSON with object keys sorted, so that key order never decides a match: JSON.stringify's text for values parsed from
 * JSON (a replacer function doing the sorting cost a call per value, most of a request's keys).
 */
export function canonical(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${mapPacked(value, (item) => (item === undefined ? "null" : canonical(item))).join(",")}]`;
  const record = value as Record<string, unknown>;
  const entries: string[] = [];
  for (const key of Object.keys(record).sort()) {
    const item = record[key];
    if (item !== undefined && typeof item !== "function") entries.push(`${JSON.stringify(key)}:${canonical(item)}`);
  }
  return `{${entries.join(",")}}`;
}
