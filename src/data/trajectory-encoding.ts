/**
 * How a trajectory record's structured fields are stored. In memory and in `.jsonl` (format_version 2) they are JSON
 * values: `messages`, `reward_extra`, `tool_scores`, `drift_detail`, tool-call `arguments`. Parquet gives each the
 * nested arrow type of trajectoryArrowSchema where one fits, and JSON text where none does (reward_extra, tool-call
 * arguments: docs/trajectory-format.md says why). Files of format_version 1 held them all as JSON text.
 *
 * The reading side turns any of those forms into the record's values before zod validates them (trajectory.ts
 * preprocesses its fields with these functions; parquet rows go through trajectoryFromParquetRow first); the
 * writing side makes the parquet row of a record.
 */
import type { PackedLists } from "./trajectory-journal.js";
import type { ContextSegment, RecordMessage, Trajectory } from "./trajectory.js";

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => value !== null && typeof value === "object" && !Array.isArray(value);

/** JSON text parsed; anything else, and text that is not JSON, as it is (zod then says what is wrong with it). */
export function fromJsonText(value: unknown): unknown {
  if (typeof value !== "string") return value;
  try {
    return JSON.parse(value) as unknown;
  } catch {
    return value;
  }
}

/** Tool-call arguments: JSON text of an object (OpenAI's API carries them so) becomes the object; else as it is. */
function argumentsValue(value: unknown): unknown {
  const parsed = fromJsonText(value);
  return isObject(parsed) ? parsed : value;
}

/** A tool segment's arguments: one call's object, or several calls' list (format 1: JSON text of a list of JSON texts). */
export function storedSegmentArguments(value: unknown): unknown {
  const parsed = fromJsonText(value);
  return Array.isArray(parsed) ? parsed.map(fromJsonText) : parsed;
}

/** tool_scores, `{tool_name: score}`: from JSON text (format 1) or parquet's list of `{name, score}`. */
export function storedToolScores(value: unknown): unknown {
  const parsed = fromJsonText(value);
  if (!Array.isArray(parsed) || !parsed.every((entry) => isObject(entry) && typeof entry["name"] === "string")) return parsed;
  return Object.fromEntries(parsed.map((entry: Json) => [entry["name"], entry["score"]]));
}

/**
 * Chat messages as the record keeps them: tool-call arguments given as JSON text of an object (the OpenAI API's
 * form, what an agent behind the gateway sends) become the object, so `.jsonl` holds JSON all the way down. Only the
 * messages that change are copied; values that are not messages are left for zod to refuse.
 */
export function recordMessages(messages: readonly unknown[]): RecordMessage[] {
  return messages.map((message) => {
    if (!isObject(message) || !Array.isArray(message["tool_calls"])) return message;
    const calls = message["tool_calls"] as unknown[];
    const parsedArguments = (call: unknown) => isObject(call) && isObject(call["function"]) && typeof call["function"]["arguments"] === "string";
    if (!calls.some(parsedArguments)) return message;
    const toolCalls = calls.map((call) => {
      if (!parsedArguments(call)) return call;
      const { function: fn } = call as { function: Json };
      return { ...(call as Json), function: { ...fn, arguments: argumentsValue(fn["arguments"]) } };
    });
    return { ...message, tool_calls: toolCalls };
  }) as RecordMessage[];
}

/** `messages` (and a context segment's): from JSON text (format 1) or a list. */
export function storedMessages(value: unknown): unknown {
  const parsed = fromJsonText(value);
  return Array.isArray(parsed) ? recordMessages(parsed) : parsed;
}

/** The message fields parquet gives a column of their own (a string each, or the tool calls' list of structs). */
const MESSAGE_TEXT_FIELDS = ["content", "reasoning_content", "tool_call_id", "name"] as const;

/**
 * Tool calls as parquet's list<struct<id, type, function: struct<name, arguments>>>, arguments as JSON text; undefined
 * when a call has another shape (extra keys, no function), and the list then goes to the message's `extra`.
 */
function parquetToolCalls(calls: unknown): Json[] | undefined {
  if (!Array.isArray(calls)) return undefined;
  const out: Json[] = [];
  for (const call of calls) {
    if (!isObject(call) || !isObject(call["function"])) return undefined;
    const { id, type, function: fn, ...rest } = call as Json & { function: Json };
    const { name, arguments: args, ...fnRest } = fn;
    if (Object.keys(rest).length > 0 || Object.keys(fnRest).length > 0) return undefined;
    if (!(id === undefined || typeof id === "string") || !(type === undefined || typeof type === "string") || typeof name !== "string") return undefined;
    if (!(typeof args === "string" || isObject(args))) return undefined;
    out.push({ id: id ?? null, type: type ?? null, function: { name, arguments: typeof args === "string" ? args : JSON.stringify(args) } });
  }
  return out;
}

/**
 * One message as parquet's struct: role, content, reasoning_content, tool_calls, tool_call_id and name in columns of
 * their own; whatever else it holds (a key OpenAI's format lacks, content given as a list of parts) as JSON text in
 * `extra`, null for the messages agentrl's loops and gateway write.
 */
function parquetMessage(message: RecordMessage): Json {
  const row: Json = { role: message.role, content: null, reasoning_content: null, tool_calls: null, tool_call_id: null, name: null, extra: null };
  const extra: Json = {};
  for (const [key, value] of Object.entries(message)) {
    if (key === "role" || value === undefined) continue;
    const toolCalls = key === "tool_calls" ? parquetToolCalls(value) : undefined;
    if (toolCalls) row["tool_calls"] = toolCalls;
    else if ((MESSAGE_TEXT_FIELDS as readonly string[]).includes(key) && (typeof value === "string" || value === null)) row[key] = value;
    else extra[key] = value;
  }
  if (Object.keys(extra).length > 0) row["extra"] = JSON.stringify(extra);
  return row;
}

/** A message read from parquet: its null fields left out (content kept), `extra` merged back. Arguments stay text here. */
function messageFromParquet(row: unknown): unknown {
  if (!isObject(row)) return row;
  const message: Json = { role: row["role"], content: row["content"] ?? null };
  for (const key of ["reasoning_content", "tool_calls", "tool_call_id", "name"]) {
    if (row[key] !== null && row[key] !== undefined) message[key] = row[key];
  }
  if (Array.isArray(message["tool_calls"])) {
    message["tool_calls"] = message["tool_calls"].map((call: unknown) => {
      if (!isObject(call)) return call;
      const out: Json = {};
      if (call["id"] !== null) out["id"] = call["id"];
      if (call["type"] !== null) out["type"] = call["type"];
      out["function"] = call["function"];
      return out;
    });
  }
  const extra = fromJsonText(row["extra"]);
  if (isObject(extra)) Object.assign(message, extra);
  return message;
}

const messagesFromParquet = (value: unknown) => (Array.isArray(value) ? value.map(messageFromParquet) : value);

/**
 * A parquet row into the record's JSON form, for zod: its messages' parquet structs back into messages. Rows of
 * format 1 files (messages as JSON text) pass through unchanged; the schema's preprocessing parses their text.
 */
export function trajectoryFromParquetRow(row: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...row, messages: messagesFromParquet(row["messages"]) };
  if (Array.isArray(row["context_segments"])) {
    out["context_segments"] = row["context_segments"].map((segment: unknown) =>
      isObject(segment) ? { ...segment, messages: messagesFromParquet(segment["messages"]) } : segment,
    );
  }
  return out;
}

const parquetContextSegment = (segment: ContextSegment): Json => ({ ...segment, messages: segment.messages.map(parquetMessage) });

/** A trajectory as the parquet writer takes it: its token-length lists as number arrays or typed (journalEntry's). */
export type ParquetSource = Omit<Trajectory, keyof PackedLists> & { [K in keyof PackedLists]: Trajectory[K] | NonNullable<PackedLists[K]> };

/** The parquet row of a record, for trajectoryArrowSchema: nested values as its types, JSON text where it has strings. */
export function trajectoryParquetRow(t: ParquetSource): Record<string, unknown> {
  return {
    ...t,
    segments: t.segments.map((s) => (s.arguments === null || s.arguments === undefined ? s : { ...s, arguments: JSON.stringify(s.arguments) })),
    calls: t.calls.map((c) => ({ ...c, arguments: JSON.stringify(c.arguments) })),
    messages: t.messages.map(parquetMessage),
    tool_scores: t.tool_scores ? Object.entries(t.tool_scores).map(([name, score]) => ({ name, score })) : null,
    reward_extra: t.reward_extra ? JSON.stringify(t.reward_extra) : null,
    context_segments: t.context_segments ? t.context_segments.map(parquetContextSegment) : null,
  };
}
