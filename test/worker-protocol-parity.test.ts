/**
 * The CLI and the worker give the same verdict on every protocol message: a table of valid and invalid examples of
 * every request, reply and event (test/fixtures/worker-protocol-cases.json) goes through zod (src/train/worker/
 * validate.ts) and through the worker's Python check of the generated JSON Schema (`python -m agentrl_worker.validate`).
 * Both must accept the valid ones, and refuse the invalid ones naming the same field.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { COMMANDS, type Command } from "../src/train/worker/protocol.js";
import { errorReplyProblem, isCommand, readyProblem, replyProblem, requestProblem } from "../src/train/worker/validate.js";
import { REPO_ROOT } from "./helpers/cli.js";
import { runPython } from "./helpers/python.js";

interface Case {
  kind: "request" | "reply" | "error_reply" | "event";
  cmd?: Command;
  event?: string;
  note: string;
  valid: boolean;
  /** For an invalid message: the field both sides' errors must name. */
  field?: string;
  message: unknown;
}

const CASES: Case[] = JSON.parse(readFileSync(path.join(REPO_ROOT, "test/fixtures/worker-protocol-cases.json"), "utf8"));

function zodProblem(c: Case): string | undefined {
  if (c.kind === "request") return requestProblem(c.message);
  if (c.kind === "reply") return replyProblem(c.cmd!, c.message);
  if (c.kind === "error_reply") return errorReplyProblem(c.message);
  if (c.event !== "ready") throw new Error(`unknown event ${c.event}`);
  return readyProblem(c.message);
}

/** The message kind a case exercises: `request init`, `reply update`, `error_reply`, `event ready`. */
function kindOf(c: Case): string {
  if (c.kind === "request") {
    const cmd = (c.message as { cmd?: unknown } | null)?.cmd;
    return isCommand(cmd) ? `request ${cmd}` : "request (not a command)";
  }
  if (c.kind === "reply") return `reply ${c.cmd}`;
  return c.kind === "event" ? `event ${c.event}` : "error_reply";
}

describe("the worker protocol's parity table", () => {
  it("has a valid and an invalid example of every request, reply and event", () => {
    const expected = [...COMMANDS.map((c) => `request ${c}`), ...COMMANDS.map((c) => `reply ${c}`), "error_reply", "event ready"];
    for (const kind of expected) {
      const examples = CASES.filter((c) => kindOf(c) === kind);
      expect(examples.some((c) => c.valid), `${kind}: a valid example`).toBe(true);
      expect(examples.some((c) => !c.valid), `${kind}: an invalid example`).toBe(true);
    }
    expect(CASES.filter((c) => !c.valid && !c.field)).toEqual([]);
  });

  it("zod accepts the valid messages and refuses the invalid ones, naming the field", () => {
    const wrong = CASES.flatMap((c) => {
      const problem = zodProblem(c);
      const right = c.valid ? problem === undefined : problem !== undefined && problem.includes(c.field!);
      return right ? [] : [{ note: c.note, problem }];
    });
    expect(wrong).toEqual([]);
  });

  it("the worker's Python check gives zod's verdict on every message, naming the same field", () => {
    const input = CASES.map(({ kind, cmd, event, message }) => JSON.stringify({ kind, cmd, event, message })).join("\n");
    const run = runPython(["-m", "agentrl_worker.validate"], { input, cwd: path.join(REPO_ROOT, "worker") });
    expect(run.stderr).toBe("");
    const verdicts = run.stdout.trim().split("\n").map((line) => JSON.parse(line) as { valid: boolean; error: string | null });
    expect(verdicts).toHaveLength(CASES.length);
    const disagreements = CASES.flatMap((c, i) => {
      const python = verdicts[i]!;
      const zodValid = zodProblem(c) === undefined;
      const named = c.valid || (python.error ?? "").includes(c.field!);
      return python.valid === zodValid && python.valid === c.valid && named ? [] : [{ note: c.note, zodValid, python }];
    });
    expect(disagreements).toEqual([]);
  });
});
