/**
 * `--where` expressions: `FIELD OP VALUE`, e.g. `reward<1`, `turns>=3`, `finish=length`, `data_source=openai/gsm8k`,
 * `error~timeout` (contains). Repeated flags must all hold. Numbers compare as numbers; strings compare exactly
 * (`=`, `!=`) or by substring (`~`, `!~`). A missing value (advantage in a rollout file) never matches, except
 * `FIELD=null`.
 */
import { UsageError } from "../errors.js";
import type { TrajectoryRecord } from "./record.js";
import { FIELDS, fieldNamed, type FieldValue } from "./fields.js";

export type Operator = "=" | "!=" | "<" | "<=" | ">" | ">=" | "~" | "!~";
const OPERATORS: readonly Operator[] = ["<=", ">=", "!=", "!~", "=", "<", ">", "~"];

export interface Condition {
  /** The expression as typed, for messages and --json. */
  text: string;
  field: string;
  op: Operator;
  value: string;
  test(t: TrajectoryRecord): boolean;
}

function bad(expression: string, why: string): never {
  throw new UsageError(`--where '${expression}': ${why}`, {
    hint: `write FIELD OP VALUE with OP one of = != < <= > >= ~ !~; fields: ${Object.keys(FIELDS).join(", ")}`,
  });
}

export function parseWhere(expression: string): Condition {
  const match = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|!=|!~|=|<|>|~)\s*(.*?)\s*$/.exec(expression);
  if (!match) bad(expression, "not a FIELD OP VALUE expression");
  const [, rawField, rawOp, rawValue] = match as unknown as [string, string, string, string];
  const op = (rawOp === "==" ? "=" : rawOp) as Operator;
  if (!OPERATORS.includes(op)) bad(expression, `unknown operator '${rawOp}'`);
  const field = fieldNamed(rawField);
  if (!field) bad(expression, `unknown field '${rawField}'`);
  const value = rawValue.replace(/^(['"])(.*)\1$/, "$2");
  const { spec } = field;
  const wantsNull = value === "null" && (op === "=" || op === "!=");
  let compare: (v: FieldValue) => boolean;
  if (wantsNull) {
    compare = op === "=" ? (v) => v === null : (v) => v !== null;
  } else if (spec.type === "number") {
    if (op === "~" || op === "!~") bad(expression, `'${op}' compares text; ${field.name} is a number`);
    const target = Number(value);
    if (value === "" || !Number.isFinite(target)) bad(expression, `'${value}' is not a number (${field.name} is numeric)`);
    compare = numberComparison(op, target);
  } else {
    if (op === "<" || op === "<=" || op === ">" || op === ">=") bad(expression, `'${op}' compares numbers; ${field.name} is text`);
    compare = textComparison(op, value);
  }
  const test = spec.all
    ? (t: TrajectoryRecord) => {
        const values = spec.all!(t);
        // "no call named X" reads naturally as != over all calls; the rest hold when any value matches.
        return op === "!=" || op === "!~" ? values.every((v) => compare(v)) : values.some((v) => compare(v));
      }
    : (t: TrajectoryRecord) => compare(spec.get(t));
  return { text: expression, field: field.name, op, value, test };
}

function numberComparison(op: Operator, target: number): (v: FieldValue) => boolean {
  const on = (fn: (x: number) => boolean) => (v: FieldValue) => typeof v === "number" && fn(v);
  switch (op) {
    case "=": return on((x) => x === target);
    case "!=": return on((x) => x !== target);
    case "<": return on((x) => x < target);
    case "<=": return on((x) => x <= target);
    case ">": return on((x) => x > target);
    case ">=": return on((x) => x >= target);
    default: throw new Error(`unreachable: ${op}`);
  }
}

function textComparison(op: Operator, target: string): (v: FieldValue) => boolean {
  const on = (fn: (x: string) => boolean) => (v: FieldValue) => v !== null && fn(String(v));
  switch (op) {
    case "=": return on((x) => x === target);
    case "!=": return on((x) => x !== target);
    case "~": return on((x) => x.includes(target));
    case "!~": return on((x) => !x.includes(target));
    default: throw new Error(`unreachable: ${op}`);
  }
}

/** Every condition must hold; --grep must appear in the trajectory's text (segments, tool calls, error). */
export interface TrajectoryFilter {
  where: Condition[];
  grep: string | null;
}

export function makeFilter(where: readonly string[] = [], grep?: string | null): TrajectoryFilter {
  return { where: where.map(parseWhere), grep: grep ?? null };
}

export function isFiltering(filter: TrajectoryFilter): boolean {
  return filter.where.length > 0 || filter.grep !== null;
}

/** The columns the conditions read (for a column-projected read; --grep needs whole records). */
export function filterColumns(filter: TrajectoryFilter): string[] {
  return filter.where.flatMap((c) => FIELDS[c.field]!.columns);
}

export function matches(filter: TrajectoryFilter, t: TrajectoryRecord): boolean {
  for (const condition of filter.where) if (!condition.test(t)) return false;
  return filter.grep === null || grepText(t, filter.grep);
}

function grepText(t: TrajectoryRecord, needle: string): boolean {
  const lower = needle.toLowerCase();
  const has = (text: string | null | undefined) => Boolean(text && text.toLowerCase().includes(lower));
  if (has(t.error) || has(JSON.stringify(t.messages))) return true;
  for (const s of t.segments) if (has(s.text)) return true;
  for (const c of t.calls) if (has(c.name) || has(c.arguments && JSON.stringify(c.arguments)) || has(c.response) || has(c.error)) return true;
  return false;
}
