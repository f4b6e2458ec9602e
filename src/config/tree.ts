/**
 * Config files for `agentrl rollout` and `agentrl train`: one YAML file, dotted `--set key=value` overrides and flags
 * on top, validated by a strict zod schema. Unknown keys are errors with the nearest valid key suggested, never
 * silent no-ops; every error names the key path.
 */
import { isDeepStrictEqual } from "node:util";
import { load as loadYaml } from "js-yaml";
import { z } from "zod";
import { InputError, UsageError } from "../errors.js";
import { readYamlFile } from "../data/yaml-file.js";
import { formatIssue, formatIssuePath } from "../zod-issues.js";
import { judgeVerlValue, showValue, verlKeyFor, verlNamesUnder, type VerlCommand, type VerlKey } from "./verl-keys.js";

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

/** Removes `a.b.c` from a nested object, if it is there. */
function deletePath(tree: ConfigTree, dotted: string): void {
  const keys = dotted.split(".");
  const parent = getPath(tree, keys.slice(0, -1).join("."));
  if (keys.length === 1) delete tree[keys[0]!];
  else if (parent !== null && typeof parent === "object") delete (parent as ConfigTree)[keys.at(-1)!];
}

/**
 * Applies overrides in Hydra's syntax, as verl's launch scripts write them: `key=value`, `+key=value` and
 * `++key=value` set a key (Hydra's plain, add, and add-or-override: every agentrl key exists with a default, so all
 * three set it); `~key` removes one (back to its default). Values are read as YAML scalars (`5`, `true`, `null`,
 * `[a, b]`, `text`).
 */
export function applySets(tree: ConfigTree, sets: readonly string[]): void {
  for (const assignment of sets) {
    if (assignment.startsWith("~")) {
      deletePath(tree, assignment.slice(1).split("=")[0]!.trim());
      continue;
    }
    const eq = assignment.indexOf("=");
    const key = assignment.slice(0, Math.max(eq, 0)).replace(/^\+\+?/, "").trim();
    if (eq <= 0 || key === "") throw new UsageError(`--set ${assignment}: expected key=value, e.g. --set actor_rollout_ref.rollout.n=8`);
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

/**
 * Every zod issue as `path: message`; unknown keys get the nearest valid key at the same level, the command's verl
 * keys (verl-keys.ts) included.
 */
export function describeConfigIssues(schema: z.ZodType, error: z.ZodError, command: VerlCommand): string[] {
  return error.issues.flatMap((issue) => {
    if (issue.code !== "unrecognized_keys") return [formatIssue(issue)];
    const shape = objectShapeAt(schema, issue.path);
    const verlNames = verlNamesUnder(issue.path.map(String).join("."), command);
    return issue.keys.map((key) => formatIssue({ ...issue, path: [...issue.path, key], message: unknownKeyMessage(key, issue.path, shape, verlNames) }));
  });
}

function unknownKeyMessage(key: string, path: readonly PropertyKey[], shape: Record<string, z.ZodType> | undefined, verlNames: readonly string[]): string {
  if (!shape) return "unknown key";
  const suggestion = nearest(key, [...Object.keys(shape), ...verlNames]);
  if (!suggestion) return `unknown key (valid keys here: ${Object.keys(shape).join(", ")})`;
  return `unknown key (did you mean ${path.length ? `${formatIssuePath(path)}.` : ""}${suggestion}?)`;
}

/** What the verl key table (verl-keys.ts) made of a config tree's verl keys. */
export interface VerlReport {
  /** Keys honoured by agentrl's fixed behaviour or under an agentrl name (`to`), with the value given. */
  honoured: { key: string; value: unknown; to?: string }[];
  /** One line per noted key (the keys of a subtree share one): `key=value ignored: why it does nothing here`. */
  notes: string[];
  /** One line per refused key: `key=value: why`. */
  refused: string[];
}

const isMapping = (value: unknown): value is ConfigTree => value !== null && typeof value === "object" && !Array.isArray(value);

/** `a.b=1, a.c.d=x`: every leaf of a subtree as its override. */
function leafAssignments(key: string, value: unknown): string[] {
  if (!isMapping(value) || Object.keys(value).length === 0) return [`${key}=${showValue(value)}`];
  return Object.entries(value).flatMap(([name, child]) => leafAssignments(`${key}.${name}`, child));
}

/**
 * Applies the verl key table to a merged config tree before the schema sees it: noted keys and keys honoured by
 * agentrl's behaviour leave the tree, renamed keys move to their agentrl name, values of agentrl keys may be rewritten
 * (logger=console → [console]), refused keys are reported. What no entry covers is left for the schema to judge.
 */
function applyVerlKeys(schema: z.ZodType, tree: ConfigTree, command: VerlCommand): VerlReport {
  const report: VerlReport = { honoured: [], notes: [], refused: [] };
  const visit = (node: ConfigTree, path: readonly string[]): void => {
    for (const [name, value] of Object.entries(node)) {
      const at = [...path, name];
      const key = at.join(".");
      const inSchema = objectShapeAt(schema, path)?.[name] !== undefined;
      const entry = verlKeyFor(key, command);
      if (entry) applyVerlKey({ tree, node, name, key, entry, inSchema }, report);
      else if (isMapping(value) && Object.keys(value).length > 0) {
        visit(value, at);
        // A verl section agentrl lacks (actor_rollout_ref.ref) is gone once its keys are.
        if (!inSchema && Object.keys(value).length === 0) delete node[name];
      }
    }
  };
  visit(tree, []);
  report.notes = [...new Set(report.notes)];
  return report;
}

/** One verl key found in the tree: `node[name]`, at dotted `key`; `inSchema`: it is an agentrl key too. */
interface VerlKeyAt {
  tree: ConfigTree;
  node: ConfigTree;
  name: string;
  key: string;
  entry: VerlKey;
  inSchema: boolean;
}

function applyVerlKey({ tree, node, name, key, entry, inSchema }: VerlKeyAt, report: VerlReport): void {
  const value = node[name];
  const verdict = entry.subtree ? entry.verdict(value) : judgeVerlValue(entry, value);
  const shown = entry.subtree ? leafAssignments(key, value).join(", ") : `${key}=${showValue(value)}`;
  const keep = (replacement: unknown) => {
    if (!inSchema) delete node[name];
    else if (replacement !== undefined) node[name] = replacement;
  };
  if (verdict.class === "refused") {
    report.refused.push(`${shown}: ${verdict.why}`);
    delete node[name];
  } else if (verdict.class === "noted") {
    const kept = inSchema && verdict.value !== undefined;
    report.notes.push(`${shown} ${kept ? `read as ${showValue(verdict.value)}` : "ignored"}: ${verdict.note}`);
    keep(verdict.value);
  } else if (verdict.to === undefined) {
    report.honoured.push({ key, value });
    keep(verdict.value);
  } else {
    const moved = verdict.value ?? value;
    const existing = getPath(tree, verdict.to);
    delete node[name];
    if (existing !== undefined && !isDeepStrictEqual(existing, moved)) {
      report.refused.push(`${shown}: verl's name of ${verdict.to}, which is set too (${showValue(existing)}); set one of them`);
    } else {
      setPath(tree, verdict.to, moved);
      report.honoured.push({ key, value, to: verdict.to });
    }
  }
}

export interface ResolvedConfig<T> {
  config: T;
  verl: VerlReport;
}

/**
 * Validates a merged config tree, verl keys first (verl-keys.ts), then the schema; throws an InputError listing every
 * problem, refused verl keys and schema issues alike. Leaves `tree` as it was.
 */
export function resolveConfig<S extends z.ZodType>(schema: S, command: VerlCommand, tree: unknown, source: string): ResolvedConfig<z.infer<S>> {
  const merged = isMapping(tree) ? structuredClone(tree) : tree;
  const verl = isMapping(merged) ? applyVerlKeys(schema, merged, command) : { honoured: [], notes: [], refused: [] };
  const parsed = schema.safeParse(merged);
  const lines = [...verl.refused, ...(parsed.success ? [] : describeConfigIssues(schema, parsed.error, command))];
  if (lines.length > 0 || !parsed.success) {
    throw new InputError(`${source}: invalid config\n  ${lines.join("\n  ")}`, {
      hint: `run with --dry-run to see the effective config; docs/config.md lists every key${verl.refused.length ? "; docs/from-verl.md explains verl's" : ""}`,
    });
  }
  return { config: parsed.data, verl };
}

/**
 * Validates a merged config tree (resolveConfig) and says each note on a verl key once, on stderr by default: a
 * command validates its config once, at the start of a run and in --dry-run, so the notes show in both.
 */
export function validateConfig<S extends z.ZodType>(
  schema: S,
  /** Whose verl keys apply: the command the schema is the config of. */
  command: VerlCommand,
  tree: unknown,
  source: string,
  onNote: (line: string) => void = (line) => process.stderr.write(`note: ${line}\n`),
): z.infer<S> {
  const { config, verl } = resolveConfig(schema, command, tree, source);
  for (const line of verl.notes) onNote(line);
  return config;
}

/** Removes keys whose value is undefined, so flags that were not given do not override the file. */
export function definedOnly<T extends Record<string, unknown>>(record: T): Partial<T> {
  return Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined)) as Partial<T>;
}
