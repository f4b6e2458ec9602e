/**
 * `agentrl template`: loads a model folder and a message file, replays the conversation through a Conversation and
 * prints the rendered text, every token with its id, and the loss mask agentrl would train on.
 */
import { z } from "zod";
import { readJsonFile } from "../data/json-file.js";
import { InputError, UsageError } from "../errors.js";
import { colorEnabled, style } from "../term.js";
import { formatIssues } from "../zod-issues.js";
import { DRIFT_MODES, type DriftMode, type DriftReport } from "./drift.js";
import { chatMessagesSchema, toolSchemasSchema, type ChatMessage, type ToolSchema } from "./messages.js";
import { loadChatModel, type ChatModel } from "./model.js";
import { replayConversation } from "./replay.js";
import type { Conversation } from "./conversation.js";

export interface TemplateCommandFlags {
  model: string;
  messages: string;
  tools?: string;
  json?: boolean;
  drift: string;
  kwargs?: string;
}

const messagesFileSchema = z.union([
  chatMessagesSchema,
  z.looseObject({ messages: chatMessagesSchema, tools: toolSchemasSchema.optional() }),
]);
const toolsFileSchema = z.union([toolSchemasSchema, z.looseObject({ tools: toolSchemasSchema })]);

function validate<T>(schema: z.ZodType<T>, value: unknown, file: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  // The file is a list or an object holding one: name the deepest place either reading reached.
  throw new InputError(`${file}: ${formatIssues(parsed.error, { only: "deepest", style: "json" })}`);
}


export async function runTemplate(flags: TemplateCommandFlags): Promise<void> {
  if (!DRIFT_MODES.includes(flags.drift as DriftMode)) {
    throw new UsageError(`--drift must be one of ${DRIFT_MODES.join(", ")}, got '${flags.drift}'`);
  }
  const messagesFile = validate(messagesFileSchema, await readJsonFile(flags.messages), flags.messages);
  const messages = (Array.isArray(messagesFile) ? messagesFile : messagesFile.messages) as ChatMessage[];
  let tools: ToolSchema[] = Array.isArray(messagesFile) ? [] : ((messagesFile.tools ?? []) as ToolSchema[]);
  if (flags.tools) {
    const toolsFile = validate(toolsFileSchema, await readJsonFile(flags.tools), flags.tools);
    tools = (Array.isArray(toolsFile) ? toolsFile : toolsFile.tools) as ToolSchema[];
  }

  const templateKwargs = parseTemplateKwargs(flags.kwargs) ?? {};

  const model = await loadChatModel(flags.model);
  const conversation = replayConversation(
    model,
    messages,
    { tools, templateKwargs, driftMode: flags.drift as DriftMode },
    flags.messages,
  );
  const drift = conversation.driftCheck();
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(templateJson(model, conversation, drift))}\n`);
    return;
  }
  process.stdout.write(formatTemplate(model, conversation, drift, colorEnabled()));
}

/** `--kwargs '{"enable_thinking": false}'`: extra chat-template variables, as a JSON object. */
export function parseTemplateKwargs(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--kwargs must be a JSON object: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new UsageError("--kwargs must be a JSON object, e.g. '{\"enable_thinking\": false}'");
  }
  return value as Record<string, unknown>;
}

export function templateJson(model: ChatModel, conversation: Conversation, drift: DriftReport) {
  const ids = [...conversation.tokenIds];
  return {
    text: model.decode(ids),
    ids,
    mask: [...conversation.lossMask],
    segments: conversation.segments.map((segment) => ({
      ...segment,
      text: model.decode(ids.slice(segment.start, segment.end)),
    })),
    drift,
  };
}

/** The human view: the text with sampled spans highlighted, then one line per token, then a summary. */
export function formatTemplate(model: ChatModel, conversation: Conversation, drift: DriftReport, color: boolean): string {
  const ids = [...conversation.tokenIds];
  const mask = [...conversation.lossMask];
  const lines: string[] = [];
  lines.push(style.bold(`model ${model.dir}`, color));
  lines.push(
    style.dim(
      `end of turn ${model.endOfTurnToken} (${model.endOfTurnTokenId}), eos ids ${model.eosTokenIds.join(", ")}, ` +
        `bridge ${JSON.stringify(model.bridgeText)}`,
      color,
    ),
  );
  lines.push("", style.bold("text", color));
  const spans = conversation.segments.map((segment) => {
    const text = model.decode(ids.slice(segment.start, segment.end));
    return segment.kind === "assistant" ? style.green(text, color) : text;
  });
  lines.push(spans.join(""), "");

  lines.push(style.bold("tokens", color));
  lines.push(style.dim(`${"pos".padStart(6)} ${"id".padStart(7)}  mask  ${"segment".padEnd(12)} token`, color));
  for (const segment of conversation.segments) {
    for (let pos = segment.start; pos < segment.end; pos++) {
      const id = ids[pos]!;
      const trained = mask[pos] === 1;
      const label = `${segment.kind}:${segment.turn}`.padEnd(12);
      const token = JSON.stringify(model.decode([id]));
      const line = `${String(pos).padStart(6)} ${String(id).padStart(7)}  ${trained ? "  1 " : "  0 "}  ${label} ${token}`;
      lines.push(trained ? style.green(line, color) : style.dim(line, color));
    }
  }
  const trained = mask.reduce((sum, value) => sum + value, 0);
  lines.push(
    "",
    `${ids.length} tokens: ${conversation.promptLength} prompt, ${conversation.responseLength} response, ` +
      `${trained} trained (mask 1), ${conversation.assistantTurns} assistant turns`,
  );
  lines.push(describeDrift(drift, color));
  return `${lines.join("\n")}\n`;
}

function describeDrift(drift: DriftReport, color: boolean): string {
  switch (drift.status) {
    case "match":
      return style.green("drift check: the token record equals a full re-render of the messages", color);
    case "skipped":
      return style.dim("drift check: off", color);
    case "whitespace_only":
      return style.yellow(`drift check: whitespace-only differences from token ${drift.firstDifference} (tolerated)`, color);
    case "reasoning_only":
      return style.yellow(
        `drift check: only reasoning blocks differ from token ${drift.firstDifference}: the template drops or adds ` +
          `<think>…</think> on re-render; the record keeps what the engine saw`,
        color,
      );
    case "drift":
      return style.yellow(
        `drift check: the token record differs from a full re-render at token ${drift.firstDifference}\n` +
          `  recorded:    ${JSON.stringify(drift.accumulatedExcerpt)}\n  re-rendered: ${JSON.stringify(drift.renderedExcerpt)}`,
        color,
      );
  }
}
