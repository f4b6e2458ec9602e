/** verl's BaseInteraction defaults: accept everything with 0.8 and never end the conversation. */
import { randomUUID } from "node:crypto";
import type { ChatMessage, Interaction, InteractionTurn } from "./types.js";

export const DEFAULT_INTERACTION_NAME = "interaction_agent";

export class BaseInteraction implements Interaction {
  readonly name: string;

  constructor(readonly config: Record<string, unknown>) {
    this.name = typeof config["name"] === "string" ? config["name"] : DEFAULT_INTERACTION_NAME;
  }

  async startInteraction(instanceId: string | undefined, _kwargs: Record<string, unknown>): Promise<string> {
    return instanceId ?? randomUUID();
  }

  async generateResponse(_instanceId: string, _messages: readonly ChatMessage[], _kwargs: Record<string, unknown>): Promise<InteractionTurn> {
    return { shouldTerminate: false, text: "Your current result seems acceptable.", turnScore: 0.8, extra: {} };
  }

  async calculateScore(_instanceId: string): Promise<number> {
    return 0.0;
  }

  async finalizeInteraction(_instanceId: string): Promise<void> {}
}
