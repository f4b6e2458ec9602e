/**
 * verl's Gsm8kInteraction: scores the last assistant message with the *strict* GSM8K scorer. A correct answer
 * ends the conversation with "Your response is correct!" and 1.0; anything else asks for another try and scores
 * 0.0 (or 0 when no `#### N` is present; both are 0 as a number).
 */
import { randomUUID } from "node:crypto";
import { computeScore } from "../rewards/gsm8k.js";
import { BaseInteraction } from "./base.js";
import type { ChatMessage, InteractionTurn } from "./types.js";

export const GSM8K_CORRECT_TEXT = "Your response is correct!";
export const GSM8K_INCORRECT_TEXT = "Your response is incorrect! You need to reflect on your answer and try again.";

interface Gsm8kInteractionState {
  response: string;
  groundTruth: unknown;
  reward: number;
}

export class Gsm8kInteraction extends BaseInteraction {
  private readonly instances = new Map<string, Gsm8kInteractionState>();

  override async startInteraction(instanceId: string | undefined, kwargs: Record<string, unknown>): Promise<string> {
    const id = instanceId ?? randomUUID();
    this.instances.set(id, { response: "", groundTruth: kwargs["ground_truth"] ?? null, reward: 0.0 });
    return id;
  }

  override async generateResponse(instanceId: string, messages: readonly ChatMessage[], _kwargs: Record<string, unknown>): Promise<InteractionTurn> {
    const state = this.require(instanceId);
    let content = "";
    for (let i = messages.length - 1; i >= 0; i--) {
      const message = messages[i] as ChatMessage;
      if (message.role === "assistant") {
        // An assistant turn with only tool calls has no content; score it as empty text.
        content = typeof message.content === "string" ? message.content : "";
        break;
      }
    }
    state.response = content;
    const reward = await this.calculateScore(instanceId);
    if (reward === 1.0) return { shouldTerminate: true, text: GSM8K_CORRECT_TEXT, turnScore: 1.0, extra: {} };
    return { shouldTerminate: false, text: GSM8K_INCORRECT_TEXT, turnScore: reward, extra: {} };
  }

  override async calculateScore(instanceId: string): Promise<number> {
    const state = this.require(instanceId);
    // A ground truth that is not a string never equals an extracted answer, as in Python.
    const groundTruth = typeof state.groundTruth === "string" ? state.groundTruth : "\u0000no ground truth";
    return computeScore(state.response, groundTruth, "strict", 0.0, 1.0);
  }

  override async finalizeInteraction(instanceId: string): Promise<void> {
    this.instances.delete(instanceId);
  }

  private require(instanceId: string): Gsm8kInteractionState {
    const state = this.instances.get(instanceId);
    if (!state) throw new Error(`unknown interaction instance ${instanceId}`);
    return state;
  }
}
