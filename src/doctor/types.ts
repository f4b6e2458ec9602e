/** The vocabulary of `agentrl doctor`: one result per check, and the options the checks read. */

export type CheckStatus = "pass" | "warn" | "fail" | "skip";

export interface CheckResult {
  /** Stable id for --json consumers: server, tokenizer, generate, template, format, weights, context. */
  id: string;
  title: string;
  status: CheckStatus;
  /** What was found, in one or two sentences. */
  detail: string;
  /** What to do about a warn or fail. */
  hint?: string;
}

export interface DoctorOptions {
  /** Local model folder: tokenizer and chat template, as the rollout uses them. */
  model: string;
  /** Base URL of the SGLang (or embedded) server. */
  server: string;
  apiKey?: string;
  /** Tool YAML in verl's format; without it a probe tool is used. */
  toolsFile?: string;
  /** Function-call format (src/parsers name or auto). */
  format: string;
  maxPromptLength: number;
  maxResponseLength: number;
  /** Where the two budgets came from, for the message ("config", "flags", "defaults"). */
  budgetSource: string;
  /** Extra chat template variables (`{enable_thinking: false}`). */
  templateKwargs?: Record<string, unknown>;
  /** Per HTTP request. @default 60 000 */
  requestTimeoutMs?: number;
  /** A LoRA run that syncs adapters (lora_rank > 0 without lora.merge): the rank the server must take. */
  loraRank?: number;
  /** Tokens asked of /generate. @default 32 */
  probeTokens?: number;
}

export interface DoctorReport {
  server: string;
  model: string;
  checks: CheckResult[];
  /** False when any check failed. */
  ok: boolean;
}
