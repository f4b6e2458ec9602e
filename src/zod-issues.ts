/**
 * The one way agentrl turns zod issues into messages: `path: message`, the path naming the place in the user's input.
 * Every folder formats its validation errors here, so they all read alike.
 */
import type { z } from "zod";

/**
 * `dotted`: `tools.0.config.timeout_s`, the way config keys and overrides name a place (the default).
 * `json`: `messages[0].content`, the way a reader finds the place in a JSON document.
 */
export type PathStyle = "dotted" | "json";

export interface IssueFormat {
  /** Where the validated value sits (`config`, `tools.2.config`, `messages`); the issue's path is appended to it. */
  at?: string;
  style?: PathStyle;
  /**
   * Which issues to report; all of them (joined by "; ") when omitted. `first`: the first one. `deepest`: the one with
   * the longest path, looking inside a union's branches (a union otherwise reports only "Invalid input" at its own
   * place).
   */
  only?: "first" | "deepest";
}

type Issue = z.core.$ZodIssue;

/** Written where an issue has no path: the whole value is wrong. */
const TOP_LEVEL = "(top level)";

/** A path as `a.0.b` (dotted) or `a[0].b` (json); an empty path is "(top level)". */
export function formatIssuePath(path: readonly PropertyKey[], style: PathStyle = "dotted"): string {
  if (path.length === 0) return TOP_LEVEL;
  if (style === "dotted") return path.map(String).join(".");
  return path
    .map((part) => (typeof part === "number" ? `[${part}]` : `.${String(part)}`))
    .join("")
    .replace(/^\./, "");
}

/** One issue as `path: message`. */
export function formatIssue(issue: Issue, options: Omit<IssueFormat, "only"> = {}): string {
  const path = options.at === undefined ? issue.path : [options.at, ...issue.path];
  return `${formatIssuePath(path, options.style)}: ${issue.message}`;
}

/** A zod error as `path: message`, or several of them joined by "; ". */
export function formatIssues(error: z.ZodError, options: IssueFormat = {}): string {
  const picked = pickIssues(error.issues, options.only);
  if (picked.length === 0) return `${options.at ?? TOP_LEVEL}: invalid`;
  return picked.map((issue) => formatIssue(issue, options)).join("; ");
}

function pickIssues(issues: readonly Issue[], only: IssueFormat["only"]): readonly Issue[] {
  if (only === undefined) return issues;
  if (only === "first") return issues.slice(0, 1);
  const flat = issues.flatMap((issue) => {
    const inner = issue.code === "invalid_union" ? issue.errors.flat() : [];
    return inner.length ? inner.map((each) => ({ ...each, path: [...issue.path, ...each.path] }) as Issue) : [issue];
  });
  const deepest = flat.reduce<Issue | undefined>((best, issue) => (best && best.path.length >= issue.path.length ? best : issue), undefined);
  return deepest ? [deepest] : [];
}
