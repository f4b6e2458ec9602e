/**
 * The start of a trajectory's token record: the prompt messages rendered into a Conversation, checked against
 * data.max_prompt_length. run-trajectory.ts opens it; an agent loop that appends before the first assistant turn
 * opens it again with the longer prompt.
 */
import { Conversation, type ChatMessage, type ToolSchema } from "../chat/index.js";
import type { Sample } from "./sample.js";
import type { TrajectoryContext } from "./trajectory-state.js";

/** The rendered prompt is longer than data.max_prompt_length; the rollout skips the prompt or fails. */
export class PromptTooLongError extends Error {
  constructor(
    readonly dataIndex: number,
    readonly length: number,
    readonly limit: number,
  ) {
    super(`row ${dataIndex}: the rendered prompt has ${length} tokens, over data.max_prompt_length=${limit}`);
  }
}

/**
 * The Conversation of `messages` (the sample's prompt unless given), with the context's tools (unless given: the
 * gateway renders the tools the agent's request names), template variables over the model's own (an agent's
 * chat_template_kwargs) and drift mode.
 */
export function openConversation(
  sample: Sample,
  ctx: TrajectoryContext,
  messages: readonly ChatMessage[] = sample.messages,
  tools: readonly ToolSchema[] = ctx.toolSchemas,
  templateKwargs?: Record<string, unknown>,
): Conversation {
  const mode = ctx.rollout.multi_turn.tokenization_sanity_check_mode;
  const conversation = Conversation.start(ctx.model, messages, {
    tools,
    ...(templateKwargs ? { templateKwargs } : {}),
    driftMode: mode === "disable" ? "off" : mode,
  });
  if (conversation.promptLength > ctx.maxPromptLength) {
    throw new PromptTooLongError(sample.dataIndex, conversation.promptLength, ctx.maxPromptLength);
  }
  return conversation;
}
