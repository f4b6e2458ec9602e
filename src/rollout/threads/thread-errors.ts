/**
 * Errors across the thread boundary. A structured clone keeps an Error's message but not its class, so the exit code,
 * the hint and PromptTooLongError's meaning would be lost: the worker sends them as fields (SentError) and the main
 * thread rebuilds what it needs.
 */
import { AgentrlError } from "../../errors.js";
import { PromptTooLongError } from "../run-trajectory.js";
import type { SentError } from "./protocol.js";

/** A rollout worker thread failed: it threw, crashed or could not start. Keeps the original error's exit code. */
export class RolloutThreadError extends AgentrlError {
  override readonly exitCode: number;

  constructor(message: string, options: { exitCode?: number; hint?: string } = {}) {
    super(message, options.hint === undefined ? {} : { hint: options.hint });
    this.exitCode = options.exitCode ?? 1;
  }
}

/** The worker's side: what the main thread needs of `err`. */
export function sendableError(err: unknown): SentError {
  if (!(err instanceof Error)) return { name: "Error", message: String(err) };
  const sent: SentError = { name: err.name, message: err.message };
  if (err.stack !== undefined) sent.stack = err.stack;
  if (err instanceof AgentrlError) {
    sent.exitCode = err.exitCode;
    if (err.hint !== undefined) sent.hint = err.hint;
  }
  if (err instanceof PromptTooLongError) sent.promptTooLong = { dataIndex: err.dataIndex, length: err.length, limit: err.limit };
  return sent;
}

/**
 * The main thread's side: a too-long prompt becomes a PromptTooLongError again (runRollout skips or refuses it, as in
 * one thread); anything else is a RolloutThreadError whose message says where it happened (`where`, e.g. "rollout
 * thread 2 of 4 failed on row 3, sample 1").
 */
export function errorFromThread(sent: SentError, where: string): Error {
  if (sent.promptTooLong) {
    const { dataIndex, length, limit } = sent.promptTooLong;
    return new PromptTooLongError(dataIndex, length, limit);
  }
  return new RolloutThreadError(`${where}: ${sent.message}`, {
    ...(sent.exitCode === undefined ? {} : { exitCode: sent.exitCode }),
    ...(sent.hint === undefined ? {} : { hint: sent.hint }),
  });
}
