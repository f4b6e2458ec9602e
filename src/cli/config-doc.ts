/**
 * Renders the config schemas as a markdown reference (docs/config.md): every key with its type, default and
 * description, straight from the zod schemas, so the docs cannot drift from what the CLI accepts.
 */
import { z } from "zod";
import { VERL_KEYS } from "../config/verl-keys.js";
import { rolloutConfigSchema } from "../rollout/config.js";
import { trainConfigSchema } from "../train/config.js";

type JsonSchema = {
  type?: string | string[];
  description?: string;
  default?: unknown;
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
};

function typeOf(schema: JsonSchema): string {
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" \\| ");
  if (schema.anyOf) return schema.anyOf.map(typeOf).join(" \\| ");
  if (schema.type === "array") return `list of ${schema.items ? typeOf(schema.items) : "any"}`;
  if (Array.isArray(schema.type)) return schema.type.join(" \\| ");
  return schema.type ?? "any";
}

function rows(schema: JsonSchema, prefix: string, out: string[]): void {
  for (const [key, child] of Object.entries(schema.properties ?? {})) {
    const name = prefix ? `${prefix}.${key}` : key;
    if (child.properties) {
      rows(child, name, out);
      continue;
    }
    const def = child.default === undefined ? "required" : `\`${JSON.stringify(child.default)}\``;
    out.push(`| \`${name}\` | ${typeOf(child)} | ${def} | ${(child.description ?? "").replaceAll("|", "\\|")} |`);
  }
}

function section(title: string, schema: z.ZodType, intro: string): string {
  const json = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as JsonSchema;
  const out: string[] = [];
  rows(json, "", out);
  return `## ${title}\n\n${intro}\n\n| key | type | default | meaning |\n|---|---|---|---|\n${out.join("\n")}\n`;
}

/** The verl key table (src/config/verl-keys.ts): the verl keys agentrl reads beyond its own, per command. */
function verlSection(): string {
  const rows = VERL_KEYS.map(
    (entry) => `| \`${entry.key}${entry.subtree ? ".*" : ""}\` | ${entry.commands.join(", ")} | ${entry.summary.replaceAll("|", "\\|")} |`,
  );
  return [
    "## verl keys agentrl reads",
    "",
    "Keys of verl's launch scripts that are not agentrl keys, or that agentrl judges by value (docs/from-verl.md).",
    "Honoured: agentrl does what they ask; noted: accepted and ignored, with a one-line note in `--dry-run` and at run",
    "start; refused: an error naming the key and why (exit 2). A key in neither table is an error naming the nearest one.",
    "",
    "| verl key | commands | what agentrl does |",
    "|---|---|---|",
    ...rows,
    "",
  ].join("\n");
}

export function configReference(): string {
  return [
    "# Config reference",
    "",
    "Generated from the zod schemas (`npm run docs:config`); every key the CLI accepts is here. Keys follow verl's names",
    "where verl has one. Unknown keys are errors with the nearest valid key suggested. Override any key on the command",
    "line with `--set dotted.key=value`.",
    "",
    section("`agentrl train --config`", trainConfigSchema, "One YAML file for a training run (examples/ has ready ones)."),
    section("`agentrl rollout --config`", rolloutConfigSchema, "Flags (`--data`, `--model`, `--server`, `--n`, ...) override these keys."),
    verlSection(),
  ].join("\n");
}
