/**
 * The generated parts of the worker protocol stay in step with its zod schemas (src/train/worker/protocol.ts): the JSON
 * Schema the Python worker validates against, and docs/worker-protocol.md, whose field reference is generated and
 * whose hand-written examples and `init` table must name exactly the schema's fields.
 * Run `npm run protocol:schema` after changing a message.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { PROTOCOL_DOC_FILE, withFieldReference } from "../src/train/worker/protocol-doc.js";
import { COMMANDS, initConfig, okReply, requests, type Command } from "../src/train/worker/protocol.js";
import { PROTOCOL_SCHEMA_FILE, protocolSchemaText } from "../src/train/worker/protocol-schema.js";
import { errorReplyProblem, readyProblem } from "../src/train/worker/validate.js";
import { REPO_ROOT } from "./helpers/cli.js";

const DOC = readFileSync(path.join(REPO_ROOT, PROTOCOL_DOC_FILE), "utf8");
const HAND_WRITTEN = DOC.slice(0, DOC.indexOf("## Field reference"));

/** The keys at the top level of a doc example such as `{"path", "metrics": {"actor/entropy", ...}, "step": <n>}`. */
function topLevelKeys(example: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  let previous = "";
  for (const match of example.matchAll(/"(?:[^"\\]|\\.)*"|[{}[\],:]|[^\s"{}[\],:]+/g)) {
    const token = match[0];
    if (token === "{" || token === "[") depth++;
    else if (token === "}" || token === "]") depth--;
    else if (token.startsWith('"') && depth === 1 && (previous === "{" || previous === ",")) keys.push(JSON.parse(token) as string);
    previous = token;
  }
  return keys;
}

/** Each command's request example and the reply example after it (one reply example may follow several requests). */
function documentedMessages(): Map<Command, { request: string[]; reply?: string[] }> {
  const found = new Map<Command, { request: string[]; reply?: string[] }>();
  let waiting: Command[] = [];
  for (const [, code] of HAND_WRITTEN.matchAll(/`(\{[^`]*\})`/g)) {
    const cmd = /^\{"cmd": "(\w+)"/.exec(code!)?.[1] as Command | undefined;
    if (cmd) {
      found.set(cmd, { request: topLevelKeys(code!).filter((k) => k !== "cmd") });
      waiting.push(cmd);
    } else if (waiting.length > 0) {
      for (const c of waiting) found.get(c)!.reply = topLevelKeys(code!).filter((k) => k !== "ok");
      waiting = [];
    }
  }
  return found;
}

const fieldsOf = (schema: { shape: Record<string, unknown> }, envelope: string[]) =>
  Object.keys(schema.shape).filter((k) => !envelope.includes(k)).sort();

describe("the worker protocol's generated files", () => {
  it(`${PROTOCOL_SCHEMA_FILE} is what the zod schemas generate (run \`npm run protocol:schema\`)`, () => {
    expect(readFileSync(path.join(REPO_ROOT, PROTOCOL_SCHEMA_FILE), "utf8")).toBe(protocolSchemaText());
  });

  it(`${PROTOCOL_DOC_FILE}'s field reference is what the zod schemas generate (run \`npm run protocol:schema\`)`, () => {
    expect(DOC).toContain("## Field reference");
    expect(DOC).toBe(withFieldReference(DOC));
  });
});

describe(`${PROTOCOL_DOC_FILE}, written by hand`, () => {
  it("shows every command's request and reply with exactly the schema's fields", () => {
    const documented = documentedMessages();
    for (const cmd of COMMANDS) {
      const example = documented.get(cmd);
      expect([...(example?.request ?? [])].sort(), `${cmd} request`).toEqual(fieldsOf(requests[cmd], ["id", "cmd"]));
      expect([...(example?.reply ?? ["(no reply example)"])].sort(), `${cmd} reply`).toEqual(fieldsOf(okReply(cmd), ["id", "ok"]));
    }
  });

  it("lists exactly the schema's init settings in the init table", () => {
    const section = HAND_WRITTEN.slice(HAND_WRITTEN.indexOf("### `init`"), HAND_WRITTEN.indexOf("### `compute_log_probs`"));
    const rows = section.split("\n").filter((line) => line.startsWith("| `"));
    const names = rows.flatMap((row) => [...row.split("|")[1]!.matchAll(/`(\w+)`/g)].map((m) => m[1]!));
    expect(names.sort()).toEqual(Object.keys(initConfig.shape).sort());
  });

  it("gives JSON examples of the ready event and of an error reply that the schema accepts", () => {
    const lines = [...HAND_WRITTEN.matchAll(/```json\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split("\n"));
    const messages = lines.flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return []; // `{"id": 3, "ok": true, ...result fields}` is a pattern, not JSON
      }
    });
    const ready = messages.filter((m) => m.event === "ready");
    const errors = messages.filter((m) => m.ok === false);
    expect([ready.length, errors.length]).toEqual([1, 1]);
    expect(readyProblem(ready[0])).toBeUndefined();
    expect(errorReplyProblem(errors[0])).toBeUndefined();
  });
});
