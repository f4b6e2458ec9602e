/**
 * Pins src/zod-issues.ts, the one formatter every validation error goes through: `path: message`, dotted paths for
 * config keys and bracketed ones for JSON documents, a place prefix, and which issues are reported. Input errors all
 * over the CLI (configs, rows, tool files, server answers) read this way, so a change here changes every one of them.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { formatIssue, formatIssuePath, formatIssues } from "../src/zod-issues.js";

const errorOf = (schema: z.ZodType, value: unknown): z.ZodError => {
  const parsed = schema.safeParse(value);
  if (parsed.success) throw new Error("expected a validation error");
  return parsed.error;
};

const messages = z.array(z.object({ role: z.string(), content: z.string() })).min(1, "expected at least one message");

describe("formatIssuePath", () => {
  it("writes dotted paths by default, bracketed indices in json style, and names an empty path", () => {
    expect(formatIssuePath(["trainer", "logger", 1])).toBe("trainer.logger.1");
    expect(formatIssuePath([1, "tool_calls", 0, "function", "name"], "json")).toBe("[1].tool_calls[0].function.name");
    expect(formatIssuePath([])).toBe("(top level)");
    expect(formatIssuePath([], "json")).toBe("(top level)");
  });
});

describe("formatIssues", () => {
  const two = errorOf(messages, [{ role: 1, content: "a" }, { role: "user" }]);

  it("reports every issue as `path: message`, joined by '; '", () => {
    expect(formatIssues(two)).toMatch(/^0\.role: .*expected string.*; 1\.content: .*expected string/);
  });

  it("reports only the first issue, in json style, under a prefix", () => {
    expect(formatIssues(two, { only: "first", at: "messages", style: "json" })).toMatch(/^messages\[0\]\.role: .*expected string/);
    expect(formatIssues(errorOf(messages, []), { only: "first", at: "messages" })).toBe("messages: expected at least one message");
  });

  it("names the whole value when the issue has no path", () => {
    expect(formatIssues(errorOf(messages, []))).toBe("(top level): expected at least one message");
  });

  it("looks inside a union's branches for the deepest place", () => {
    const file = z.union([messages, z.looseObject({ messages })]);
    const error = errorOf(file, { messages: [{ role: "user", content: 4 }] });
    expect(formatIssues(error, { only: "first" })).toMatch(/^\(top level\): /);
    expect(formatIssues(error, { only: "deepest", style: "json" })).toMatch(/^messages\[0\]\.content: .*expected string/);
  });
});

describe("formatIssue", () => {
  it("formats one issue, with the place prefix", () => {
    const issue = errorOf(z.object({ timeout_s: z.number() }), { timeout_s: "ten" }).issues[0]!;
    expect(formatIssue(issue, { at: "tools.0.config" })).toMatch(/^tools\.0\.config\.timeout_s: .*expected number/);
  });
});
