/** Public surface of the tools package: load a YAML, run calls, truncate observations. */
export type { Tool, ToolAgentData, ToolClass, ToolContext, ToolExecuteResult, ToolResponse } from "./types.js";
export { ToolSession, TOOL_LIFETIMES, type ToolLifetime, type ToolKwargsEntry } from "./session.js";
export { BaseTool } from "./base-tool.js";
export { openAIFunctionToolSchema, schemaForTemplate, type OpenAIFunctionToolSchema } from "./schema.js";
export { loadToolRegistry, ToolRegistry, BUILTIN_TOOL_CLASSES, DEFAULT_TOOL_CONCURRENCY, type LoadToolsOptions, type ToolCallSettings } from "./registry.js";
export { readToolsFile, parseToolsFile, type ToolEntry, type ToolsFile } from "./config.js";
export {
  runToolCall,
  DEFAULT_TOOL_TIMEOUT_MS,
  DEFAULT_MAX_OUTPUT_CHARS,
  type ToolCallRequest,
  type ToolCallOutcome,
  type ToolCallMetrics,
  type ToolsKwargs,
  type RunToolCallOptions,
} from "./runner.js";
export { truncateToolResponse, DEFAULT_MAX_TOOL_RESPONSE_LENGTH, DEFAULT_TRUNCATE_SIDE, type TruncateSide } from "./truncate.js";
export { ToolOutputError, type ToolErrorKind } from "./tool-errors.js";
export { Gsm8kTool, GSM8K_NON_IMPROVED_PENALTY } from "./gsm8k-tool.js";
export { CalculatorTool, evaluateExpression, formatCalcValue } from "./calculator.js";
export { PythonCodeTool, runPythonCode, resolveInterpreter, pythonSandboxProblem, pythonToolConfigSchema, type PythonToolConfig } from "./python-tool.js";
export { buildBwrapArgv, checkBwrap, probeInterpreter, type BwrapPlan } from "./sandbox.js";
export { startPythonHost, toolHostConfigSchema, toolHostSandboxProblem, type ToolHostConfig } from "./python-host.js";
export { pythonClassPath } from "./python-host-tool.js";
export { VaultTool } from "./vault-tool.js";
export { McpTool } from "./mcp.js";
export { Semaphore } from "./semaphore.js";
export { pyFloatRepr, pyStrRepr, pyStr, pyJsonDumps } from "./python-repr.js";
