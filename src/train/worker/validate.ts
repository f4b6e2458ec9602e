/**
 * Checks a protocol message against its zod schema (protocol.ts) and says what is wrong, naming the field. The
 * client runs these on what it sends and receives; the Python worker gives the same verdicts from the generated JSON
 * Schema (agentrl_worker/protocol.py), which test/worker-protocol-parity.test.ts holds it to.
 */
import type { z } from "zod";
import { formatIssues } from "../../zod-issues.js";
import { errorReply, okReply, readyEvent, requests, type Command } from "./protocol.js";

function problem(schema: z.ZodType, message: unknown): string | undefined {
  const parsed = schema.safeParse(message);
  if (parsed.success) return undefined;
  // The field's dotted path first, as the worker's messages name it (config.lr, metrics.sft/loss).
  return formatIssues(parsed.error);
}

export function isCommand(cmd: unknown): cmd is Command {
  return typeof cmd === "string" && Object.hasOwn(requests, cmd);
}

/** What is wrong with a request, dispatched on its `cmd` as the worker does; undefined when it is valid. */
export function requestProblem(message: unknown): string | undefined {
  const cmd = (message as { cmd?: unknown } | null)?.cmd;
  if (typeof message !== "object" || message === null || Array.isArray(message) || typeof cmd !== "string") {
    return "a command is an object with a string cmd";
  }
  if (!isCommand(cmd)) return `unknown command ${JSON.stringify(cmd)}`;
  return problem(requests[cmd], message);
}

/** What is wrong with a successful reply to `cmd`. */
export function replyProblem(cmd: Command, message: unknown): string | undefined {
  return problem(okReply(cmd), message);
}

export function errorReplyProblem(message: unknown): string | undefined {
  return problem(errorReply, message);
}

export function readyProblem(message: unknown): string | undefined {
  return problem(readyEvent, message);
}
