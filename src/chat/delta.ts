/**
 * The text a template puts after an assistant turn when environment messages (tool results, a user message) follow,
 * up to and including the next generation prompt. It is derived from two facts only: where the template closes an
 * assistant message (its end-of-turn token) and what it renders after it. Nothing here knows a model by name.
 *
 * Method: render a fixed probe conversation (user, assistant with a marker content) followed by the new messages,
 * with the generation prompt, and keep everything after the assistant's end-of-turn token. The probe, not the real
 * history, is rendered, because templates rewrite history (Qwen3 drops earlier `<think>` blocks once a new user
 * message arrives); what follows the end-of-turn token does not depend on it. When the new messages are tool
 * results, the probe assistant carries matching tool calls, since some templates check that pairing. The end of
 * the probe assistant message is the first end-of-turn token after the first marker.
 */
import { AgentrlError } from "../errors.js";
import { ASSISTANT_MARKER, probeConversation, type ChatModel, type RenderOptions } from "./model.js";
import type { ChatMessage, ToolCall } from "./messages.js";

/** Bridge + rendered new messages + generation prompt, as text. It starts right after the end-of-turn token. */
export function environmentDeltaText(
  model: ChatModel,
  messages: readonly ChatMessage[],
  options: Omit<RenderOptions, "addGenerationPrompt"> = {},
): string {
  const calls = probeToolCalls(messages);
  // Some templates refuse several calls in one message (Llama 3.1 raises), so fewer calls are tried after all.
  const variants = calls.length > 1 ? [calls, calls.slice(0, 1)] : [calls];
  let lastError: unknown;
  for (const variant of variants) {
    const probe = probeConversation(variant.length > 0 ? { tool_calls: variant } : {});
    let text: string;
    try {
      text = model.render([...probe, ...messages], { ...options, addGenerationPrompt: true });
    } catch (err) {
      lastError = err;
      continue;
    }
    const marker = text.indexOf(ASSISTANT_MARKER);
    const end = marker < 0 ? -1 : text.indexOf(model.endOfTurnToken, marker + ASSISTANT_MARKER.length);
    if (end < 0) {
      throw new AgentrlError(
        `${model.chatTemplateFile}: the chat template does not close an assistant message with ` +
          `${JSON.stringify(model.endOfTurnToken)}, so new messages cannot be appended as a delta`,
      );
    }
    return text.slice(end + model.endOfTurnToken.length);
  }
  throw lastError;
}

/** Tool calls for the probe assistant, one per leading tool message, named and numbered as those messages say. */
function probeToolCalls(messages: readonly ChatMessage[]): ToolCall[] {
  const calls: ToolCall[] = [];
  for (const message of messages) {
    if (message.role !== "tool") break;
    calls.push({
      id: message.tool_call_id ?? `call_${calls.length}`,
      type: "function",
      // The marker also goes into the arguments: some templates (Llama 3) drop the content of a tool-call message.
      function: { name: message.name ?? "tool", arguments: { agentrl_probe: ASSISTANT_MARKER } },
    });
  }
  return calls;
}
