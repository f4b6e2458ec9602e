/**
 * Config files for `agentrl rollout` and `agentrl train`: one YAML file, dotted `--set key=value` overrides and flags
 * on top, validated by a strict zod schema. Unknown keys are errors with the nearest valid key suggested, never
 * silent no-ops; every error names the key path.
 */
import { load as loadYaml } from "js-yaml";
import { z } from "zod";
import { InputError, UsageError } from "../errors.js";
import { readYamlFile } from "../data/yaml-file.js";
import { formatIssue, formatIssuePath } from "../zod-issues.js";

export type ConfigTree = Record<string, unknown>;

export async function readYamlConfig(file: string): Promise<ConfigTree> {
  const value = await readYamlFile(file);
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) throw new InputError(`${file}: the config must be a YAML mapping`);
  return value as ConfigTree;
}

/** Sets `a.b.c` in a nested object, creating the intermediate objects. */
export function setPath(tree: ConfigTree, dotted: string, value: unknown): void {
  const keys = dotted.split(".");
  let node: ConfigTree = tree;
  for (const key of keys.slice(0, -1)) {
    const next = node[key];
    if (next === undefined || next === null || typeof next !== "object" || Array.isArray(next)) node[key] = {};
    node = node[key] as ConfigTree;
  }
  node[keys.at(-1)!] = value;
}

export function getPath(tree: unknown, dotted: string): unknown {
  let node = tree;
  for (const key of dotted.split(".")) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as ConfigTree)[key];
  }
  return node;
}

/** Applies `key=value` overrides; values are read as YAML scalars (`5`, `true`, `null`, `[a, b]`, `text`). */
export function applySets(tree: ConfigTree, sets: readonly string[]): void {
  for (const assignment of sets) {
    const eq = assignment.indexOf("=");
    if (eq <= 0) throw new UsageError(`--set ${assignment}: expected key=value, e.g. --set actor_rollout_ref.rollout.n=8`);
    const key = assignment.slice(0, eq).trim();
    const raw = assignment.slice(eq + 1);
    let value: unknown;
    try {
      value = raw === "" ? "" : loadYaml(raw);
    } catch {
      value = raw;
    }
    setPath(tree, key, value);
  }
}

/** Edit distance, for "did you mean" suggestions. */
export function levenshtein(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = current;
    }
  }
  return row[b.length]!;
}

export function nearest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const d = levenshtein(word, candidate);
    if (d < bestDistance) {
      bestDistance = d;
      best = candidate;
    }
  }
  return best !== undefined && bestDistance <= Math.max(2, Math.floor(word.length / 3)) ? best : undefined;
}

/** The object schema reached by following `path` from `schema`, through optional/default/nullable wrappers. */
function objectShapeAt(schema: z.ZodType, path: readonly PropertyKey[]): Record<string, z.ZodType> | undefined {
  let node: z.ZodType | undefined = schema;
  for (const key of [...path, null]) {
    while (node) {
      const def = (node as unknown as { def: { type: string; innerType?: z.ZodType; element?: z.ZodType } }).def;
      if (def.type === "optional" || def.type === "default" || def.type === "nullable" || def.type === "prefault" || def.type === "readonly") {
        node = def.innerType;
      } else break;
    }
    if (!node) return undefined;
    if (key === null) break;
    const def = (node as unknown as { def: { type: string; element?: z.ZodType } }).def;
    if (def.type === "object") node = (node as z.ZodObject).shape[String(key)] as z.ZodType | undefined;
    else if (def.type === "array" && typeof key === "number") node = def.element;
    else return undefined;
  }
  const def = (node as unknown as { def: { type: string } } | undefined)?.def;
  return def?.type === "object" ? ((node as z.ZodObject).shape as Record<string, z.ZodType>) : undefined;
}

/** Every zod issue as `path: message`; unknown keys get the nearest valid key at the same level. */
export function describeConfigIssues(schema: z.ZodType, error: z.ZodError): string[] {
  return error.issues.flatMap((issue) => {
    if (issue.code !== "unrecognized_keys") return [formatIssue(issue)];
    const shape = objectShapeAt(schema, issue.path);
    return issue.keys.map((key) => formatIssue({ ...issue, path: [...issue.path, key], message: unknownKeyMessage(key, issue.path, shape) }));
  });
}

function unknownKeyMessage(key: string, path: readonly PropertyKey[], shape: Record<string, z.ZodType> | undefined): string {
  if (!shape) return "unknown key";
  const suggestion = nearest(key, Object.keys(shape));
  if (!suggestion) return `unknown key (valid keys here: ${Object.keys(shape).join(", ")})`;
  return `unknown key (did you mean ${path.length ? `${formatIssuePath(path)}.` : ""}${suggestion}?)`;
}

/** Validates a merged config tree; throws an InputError listing every problem. */
export function validateConfig<S extends z.ZodType>(schema: S, tree: unknown, source: string): z.infer<S> {
  const parsed = schema.safeParse(tree);
  if (parsed.success) return parsed.data;
  const lines = describeConfigIssues(schema, parsed.error);
  throw new InputError(`${source}: invalid config\n  ${lines.join("\n  ")}`, {
    hint: "run with --dry-run to see the effective config; docs/config.md lists every key",
  });
}

/** Removes keys whose value is undefined, so flags that were not given do not override the file. */
export function definedOnly<T extends Record<string, unknown>>(record: T): Partial<T> {
  return Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined)) as Partial<T>;
}
