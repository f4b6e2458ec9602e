/** The chat layer: a model's tokenizer and template, and the token-in/token-out conversation record. */
export { ChatModel, loadChatModel, type RenderOptions, type DecodeOptions } from "./model.js";
export { customChatTemplate, type ChatTemplateSource } from "./files.js";
export {
  Conversation,
  type ConversationExport,
  type ConversationOptions,
  type EnvironmentAppend,
  type ExportedSegment,
  type Segment,
  type SegmentKind,
  type SampledTurnInfo,
  type DriftMetrics,
} from "./conversation.js";
export { DRIFT_MODES, type DriftMode, type DriftReport, type DriftStatus } from "./drift.js";
export {
  chatMessageSchema,
  chatMessagesSchema,
  toolSchemasSchema,
  normalizeForTemplate,
  type ChatMessage,
  type ToolCall,
  type ToolSchema,
} from "./messages.js";
export { environmentDeltaText } from "./delta.js";
export { replayConversation } from "./replay.js";
export { freezeTemplateValue } from "./jinja-values.js";
