/**
 * SFT examples: token ids and a loss mask per conversation, made by the same conversation code as RL (replayConversation,
 * what `agentrl template` shows), so there is no second tokenization path. Two inputs:
 * - conversations: parquet or JSON-lines rows with a messages column (assistant tool_calls, tool messages) and an
 *   optional tools column, as verl's multi-turn SFT dataset reads them;
 * - trajectory files written by `agentrl rollout`/`train`: their token record is used as it is (the exact sampled
 *   tokens and mask), filtered by status and reward, for rejection-sampling fine-tuning.
 */
import { z } from "zod";
import { InputError } from "../errors.js";
import { formatIssues } from "../zod-issues.js";
import type { ChatModel } from "../chat/index.js";
import { chatMessagesSchema, toolSchemasSchema, type ChatMessage, type ToolSchema } from "../chat/messages.js";
import { replayConversation } from "../chat/replay.js";
import { checkInputFile } from "../data/input-file.js";
import { readJsonLines } from "../data/jsonl.js";
import { streamParquetRows } from "../data/parquet.js";
import { parseTrajectory } from "../data/trajectory.js";
import { fromJsonText, trajectoryFromParquetRow } from "../data/trajectory-encoding.js";
import type { SftConfig } from "./config.js";

export interface SftExample {
  ids: number[];
  /** 1 on the assistant tokens the loss is computed on, 0 elsewhere; same length as ids. */
  lossMask: number[];
  /** `file: row N`, for messages. */
  where: string;
}

export interface ExampleCounts {
  rows: number;
  kept: number;
  /** Over max_length and cut at the end (truncation: right). */
  truncated: number;
  /** Over max_length and skipped (truncation: drop). */
  dropped: number;
  /** Trajectory files: not completed, or under min_reward. */
  filtered: number;
  /** Rows left without any loss token (e.g. truncated before the first assistant token). */
  empty: number;
}

export interface LoadedExamples {
  examples: SftExample[];
  counts: ExampleCounts;
}

/** A row of a file; `parquet` when it is a parquet row (trajectories there have nested columns to decode). */
type RawRow = { where: string; row: unknown; parquet?: boolean };

async function* rawRows(file: string): AsyncGenerator<RawRow> {
  await checkInputFile(file, "a .parquet or .jsonl file");
  if (/\.jsonl?$/.test(file)) {
    for await (const { line, value, error } of readJsonLines(file)) {
      if (error) throw new InputError(`${file}: line ${line}: ${error}`);
      yield { where: `${file}: line ${line}`, row: value };
    }
    return;
  }
  if (!file.endsWith(".parquet")) throw new InputError(`${file}: expected a .parquet, .jsonl or .json file`);
  for await (const { index, row } of streamParquetRows(file)) yield { where: `${file}: row ${index}`, row, parquet: true };
}

function isTrajectoryRow(row: unknown): boolean {
  return typeof row === "object" && row !== null && "format_version" in row && "response_ids" in row && "prompt_ids" in row;
}

const toolsFieldSchema = z.union([toolSchemasSchema, z.string(), z.null()]).optional();

/** Checks what the template cannot: every assistant tool call names a tool of the row's tools, when tools are given. */
function checkToolNames(messages: readonly ChatMessage[], tools: readonly ToolSchema[], where: string, messagesKey: string): void {
  if (tools.length === 0) return;
  const names = new Set(tools.map((tool) => ((tool as { function?: { name?: string } }).function?.name ?? (tool as { name?: string }).name)));
  messages.forEach((message, i) => {
    message.tool_calls?.forEach((call, j) => {
      if (!names.has(call.function.name)) {
        throw new InputError(
          `${where}: ${messagesKey}[${i}].tool_calls[${j}].function.name: ${JSON.stringify(call.function.name)} is not in tools (${[...names].join(", ")})`,
        );
      }
    });
  });
}

function conversationExample(model: ChatModel, raw: RawRow, config: SftConfig): SftExample {
  const { messages_key: messagesKey, tools_key: toolsKey } = config.data.multiturn;
  const row = raw.row as Record<string, unknown>;
  if (typeof row !== "object" || row === null || !(messagesKey in row)) {
    throw new InputError(`${raw.where}: no ${messagesKey} column`, {
      hint: `set data.multiturn.messages_key to the column holding the chat messages`,
    });
  }
  const parsedMessages = chatMessagesSchema.safeParse(fromJsonText(row[messagesKey]));
  if (!parsedMessages.success) {
    throw new InputError(`${raw.where}: ${formatIssues(parsedMessages.error, { only: "first", at: messagesKey, style: "json" })}`);
  }
  const parsedTools = toolsFieldSchema.safeParse(fromJsonText(row[toolsKey]));
  if (!parsedTools.success || typeof parsedTools.data === "string") {
    throw new InputError(`${raw.where}: ${toolsKey}: expected a list of tool schemas`);
  }
  const messages = parsedMessages.data as ChatMessage[];
  const tools = (parsedTools.data ?? []) as ToolSchema[];
  checkToolNames(messages, tools, raw.where, messagesKey);
  if (!messages.some((m) => m.role === "assistant")) {
    throw new InputError(`${raw.where}: ${messagesKey}: no assistant message to learn from`);
  }
  const conversation = replayConversation(model, messages, { tools, driftMode: "off" }, `${raw.where}: ${messagesKey}`);
  return { ids: [...conversation.tokenIds], lossMask: [...conversation.lossMask], where: raw.where };
}

function trajectoryExample(raw: RawRow, config: SftConfig): SftExample | "filtered" {
  const row = raw.row as Record<string, unknown>;
  const t = parseTrajectory(raw.parquet ? trajectoryFromParquetRow(row) : row, raw.where);
  if (t.status !== "completed") return "filtered";
  if (config.data.min_reward !== null && t.reward < config.data.min_reward) return "filtered";
  return {
    ids: [...t.prompt_ids, ...t.response_ids],
    lossMask: [...new Array<number>(t.prompt_ids.length).fill(0), ...t.response_mask],
    where: raw.where,
  };
}

/** Applies data.truncation to an example over max_length: the example, or null when it is dropped. */
function fitLength(example: SftExample, config: SftConfig, counts: ExampleCounts): SftExample | null {
  const max = config.data.max_length;
  if (example.ids.length <= max) return example;
  if (config.data.truncation === "error") {
    throw new InputError(`${example.where}: ${example.ids.length} tokens, over data.max_length ${max}`, {
      hint: "raise data.max_length, or set data.truncation to right (cut the end) or drop (skip such rows)",
    });
  }
  if (config.data.truncation === "drop") {
    counts.dropped += 1;
    return null;
  }
  counts.truncated += 1;
  return { ...example, ids: example.ids.slice(0, max), lossMask: example.lossMask.slice(0, max) };
}

/** Reads, validates and tokenizes every conversation of `files`; errors name the file, row and field. */
export async function loadExamples(model: ChatModel, files: readonly string[], config: SftConfig): Promise<LoadedExamples> {
  const counts: ExampleCounts = { rows: 0, kept: 0, truncated: 0, dropped: 0, filtered: 0, empty: 0 };
  const examples: SftExample[] = [];
  for (const file of files) {
    for await (const raw of rawRows(file)) {
      counts.rows += 1;
      const made = isTrajectoryRow(raw.row) ? trajectoryExample(raw, config) : conversationExample(model, raw, config);
      if (made === "filtered") {
        counts.filtered += 1;
        continue;
      }
      const fitted = fitLength(made, config, counts);
      if (!fitted) continue;
      // The loss never covers position 0: a token needs a context to be predicted from.
      if (!fitted.lossMask.some((m, i) => m === 1 && i > 0)) {
        counts.empty += 1;
        continue;
      }
      examples.push(fitted);
    }
  }
  counts.kept = examples.length;
  return { examples, counts };
}
