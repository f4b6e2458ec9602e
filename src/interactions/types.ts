/** verl's BaseInteraction lifecycle (verl/interactions/base.py): a simulated user that answers assistant turns. */

export interface ChatMessage {
  role: string;
  // Wide on purpose: the chat layer also carries multimodal content lists.
  content?: unknown;
  [key: string]: unknown;
}

export interface InteractionTurn {
  /** True ends the trajectory after this user turn. */
  shouldTerminate: boolean;
  /** The user message appended to the conversation. */
  text: string;
  /** Recorded in `turn_scores`; not added to the training reward by default. */
  turnScore: number;
  extra: Record<string, unknown>;
}

export interface Interaction {
  /** The registry name samples select with `interaction_kwargs.name`. */
  readonly name: string;
  readonly config: Record<string, unknown>;
  /** Receives the sample's whole interaction_kwargs (verl: `start_interaction(request_id, **interaction_kwargs)`). */
  startInteraction(instanceId: string | undefined, kwargs: Record<string, unknown>): Promise<string>;
  generateResponse(instanceId: string, messages: readonly ChatMessage[], kwargs: Record<string, unknown>): Promise<InteractionTurn>;
  calculateScore(instanceId: string, kwargs?: Record<string, unknown>): Promise<number>;
  finalizeInteraction(instanceId: string, kwargs?: Record<string, unknown>): Promise<void>;
}

export type InteractionClass = new (config: Record<string, unknown>) => Interaction;
