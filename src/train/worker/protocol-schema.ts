/**
 * The protocol's zod schemas as one JSON document of JSON Schemas (draft 2020-12), for the Python worker:
 * `npm run protocol:schema` writes it to worker/agentrl_worker/protocol.schema.json, and
 * test/worker-protocol-schema.test.ts fails when the committed file is stale.
 */
import { z } from "zod";
import { COMMANDS, PROTOCOL_VERSION, errorReply, okReply, readyEvent, requests } from "./protocol.js";

export const PROTOCOL_SCHEMA_FILE = "worker/agentrl_worker/protocol.schema.json";

function jsonSchema(schema: z.ZodType): Record<string, unknown> {
  return z.toJSONSchema(schema, { target: "draft-2020-12", io: "input" }) as Record<string, unknown>;
}

function byCommand(schema: (cmd: (typeof COMMANDS)[number]) => z.ZodType): Record<string, unknown> {
  return Object.fromEntries(COMMANDS.map((cmd) => [cmd, jsonSchema(schema(cmd))]));
}

/** `requests` and `replies` are keyed by command; each entry is a whole message's schema. */
export function protocolSchema(): Record<string, unknown> {
  return {
    $comment: "Generated from src/train/worker/protocol.ts by `npm run protocol:schema`; do not edit.",
    protocol: PROTOCOL_VERSION,
    requests: byCommand((cmd) => requests[cmd]),
    replies: byCommand(okReply),
    error_reply: jsonSchema(errorReply),
    events: { ready: jsonSchema(readyEvent) },
  };
}

export function protocolSchemaText(): string {
  return `${JSON.stringify(protocolSchema(), null, 2)}\n`;
}
