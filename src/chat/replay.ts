/**
 * Replays a finished conversation (a message list with assistant turns) through a Conversation, as if an engine had
 * sampled each assistant message exactly as the template renders it. This shows the token record and loss mask
 * agentrl would train on for such a conversation; `agentrl template` prints it.
 */
import { InputError } from "../errors.js";
import { Conversation, type ConversationOptions } from "./conversation.js";
import type { ChatModel } from "./model.js";
import { probeConversation } from "./model.js";
import type { ChatMessage } from "./messages.js";

export function replayConversation(
  model: ChatModel,
  messages: readonly ChatMessage[],
  options: ConversationOptions = {},
  source = "messages",
): Conversation {
  const first = messages.findIndex((message) => message.role === "assistant");
  if (first === -1) return Conversation.start(model, messages, options);
  if (first === 0) {
    throw new InputError(`${source}: [0].role: the first message is an assistant message; a conversation needs a prompt`);
  }
  const conversation = Conversation.start(model, messages.slice(0, first), options);
  let i = first;
  while (i < messages.length) {
    const message = messages[i]!;
    if (message.role === "assistant") {
      if (!conversation.awaitingSample) {
        throw new InputError(
          `${source}: [${i}].role: two assistant messages in a row; put the tool results or user turn between them`,
        );
      }
      const ids = assistantTokens(model, messages.slice(0, i), message, options);
      conversation.appendSampled(ids, undefined, { message });
      i += 1;
      continue;
    }
    let end = i;
    while (end < messages.length && messages[end]!.role !== "assistant") end += 1;
    conversation.appendEnvironment(messages.slice(i, end));
    i = end;
  }
  return conversation;
}

/**
 * The tokens a model following its template would sample for `message`: the text the template adds for it after the
 * generation prompt, up to and including its end-of-turn token. Rendered after the real history when that history
 * renders as a prefix, otherwise after a probe prompt; failing both, the content and the end-of-turn token.
 */
function assistantTokens(
  model: ChatModel,
  history: readonly ChatMessage[],
  message: ChatMessage,
  options: ConversationOptions,
): number[] {
  const renderOptions = { tools: options.tools, templateKwargs: options.templateKwargs };
  for (const before of [history, probeConversation().slice(0, 1)]) {
    const prompt = model.render(before, { ...renderOptions, addGenerationPrompt: true });
    const full = model.render([...before, message], { ...renderOptions, addGenerationPrompt: false });
    if (!full.startsWith(prompt)) continue;
    let text = full.slice(prompt.length);
    if (model.bridgeText && text.endsWith(model.endOfTurnToken + model.bridgeText)) {
      text = text.slice(0, text.length - model.bridgeText.length);
    }
    return model.encode(text);
  }
  const content = typeof message.content === "string" ? message.content : "";
  return [...model.encode(content), model.endOfTurnTokenId];
}
