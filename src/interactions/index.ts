export type { ChatMessage, Interaction, InteractionClass, InteractionTurn } from "./types.js";
export { BaseInteraction, DEFAULT_INTERACTION_NAME } from "./base.js";
export { Gsm8kInteraction, GSM8K_CORRECT_TEXT, GSM8K_INCORRECT_TEXT } from "./gsm8k.js";
export {
  InteractionRegistry,
  loadInteractionRegistry,
  parseInteractionFile,
  defaultInteractionName,
  BUILTIN_INTERACTION_CLASSES,
  type LoadInteractionsOptions,
} from "./registry.js";
