/**
 * Interaction YAML in verl's format (verl/interactions/utils/interaction_registry.py):
 *   interaction:
 *     - name: "gsm8k"                                                   # optional
 *       class_name: "verl.interactions.gsm8k_interaction.Gsm8kInteraction"
 *       config: {}
 * A missing name is the class's simple name without the `Interaction` suffix, lowercased; the name is injected
 * into `config.name`; duplicate names are an error. Samples pick one by `interaction_kwargs.name`.
 */
import { z } from "zod";
import { InputError } from "../errors.js";
import { yamlDirOf } from "../tools/config.js";
import { formatIssues } from "../zod-issues.js";
import { readYamlFile } from "../data/yaml-file.js";
import { isModulePath, loadModuleExport, simpleNameOf } from "../tools/module-loader.js";
import { BaseInteraction } from "./base.js";
import { Gsm8kInteraction } from "./gsm8k.js";
import type { Interaction, InteractionClass } from "./types.js";

export const BUILTIN_INTERACTION_CLASSES: Record<string, InteractionClass> = {
  "verl.interactions.gsm8k_interaction.Gsm8kInteraction": Gsm8kInteraction,
  "agentrl.interactions.Gsm8kInteraction": Gsm8kInteraction,
  "verl.interactions.base.BaseInteraction": BaseInteraction,
  "agentrl.interactions.BaseInteraction": BaseInteraction,
};

export const interactionEntrySchema = z.object({
  name: z.string().min(1).nullish(),
  class_name: z.string().min(1),
  config: z.record(z.string(), z.unknown()).nullish(),
});
export const interactionFileSchema = z.object({ interaction: z.array(interactionEntrySchema) });

/** verl's default: "Gsm8kInteraction" → "gsm8k", "MyJudge" → "myjudge". */
export function defaultInteractionName(className: string): string {
  const simple = simpleNameOf(className);
  return (simple.endsWith("Interaction") ? simple.slice(0, -"Interaction".length) : simple).toLowerCase();
}

export class InteractionRegistry {
  private readonly byName = new Map<string, Interaction>();

  add(name: string, interaction: Interaction, where = "interaction"): void {
    if (this.byName.has(name)) {
      throw new InputError(`${where}: duplicate interaction name ${JSON.stringify(name)}`, { hint: "each interaction must have a unique name" });
    }
    this.byName.set(name, interaction);
  }

  get(name: string): Interaction | undefined {
    return this.byName.get(name);
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  /**
   * The interaction a sample asks for. verl's agent loop requires `interaction_kwargs.name` and raises when it is
   * missing or unknown; both are bad dataset rows here. `where` names the row (e.g. `data/train.parquet row 17`).
   */
  select(interactionKwargs: Record<string, unknown> | undefined, where = "sample"): Interaction {
    const name = interactionKwargs?.["name"];
    if (typeof name !== "string") {
      throw new InputError(`${where}: extra_info.interaction_kwargs.name is required when an interaction config is given`, {
        hint: `set it to one of: ${this.names().join(", ")}`,
      });
    }
    const interaction = this.byName.get(name);
    if (!interaction) {
      throw new InputError(`${where}: interaction ${JSON.stringify(name)} not found; available: ${this.names().join(", ")}`);
    }
    return interaction;
  }
}

export interface LoadInteractionsOptions {
  /** Directories JS interaction modules may be loaded from (empty: module paths are refused). */
  moduleDirs?: readonly string[];
}

function validateInteraction(candidate: unknown, where: string): Interaction {
  const methods = ["startInteraction", "generateResponse", "calculateScore", "finalizeInteraction"];
  const missing = methods.filter((m) => typeof (candidate as Record<string, unknown> | null)?.[m] !== "function");
  if (!candidate || typeof candidate !== "object" || missing.length > 0) {
    throw new InputError(`${where}: the class does not implement the interaction lifecycle (missing: ${missing.join(", ")})`);
  }
  return candidate as Interaction;
}

export async function parseInteractionFile(raw: unknown, file: string, options: LoadInteractionsOptions = {}): Promise<InteractionRegistry> {
  const parsed = interactionFileSchema.safeParse(raw);
  if (!parsed.success) throw new InputError(`${file}: ${formatIssues(parsed.error, { only: "first" })}`);
  const registry = new InteractionRegistry();
  for (const [i, entry] of parsed.data.interaction.entries()) {
    const where = `${file}: interaction.${i}`;
    const name = entry.name ?? defaultInteractionName(entry.class_name);
    const config = { ...(entry.config ?? {}), name };
    let cls: InteractionClass | undefined = BUILTIN_INTERACTION_CLASSES[entry.class_name];
    if (!cls && isModulePath(entry.class_name)) {
      const exported = await loadModuleExport(entry.class_name, yamlDirOf(file), options.moduleDirs ?? [], `${where}.class_name`);
      if (typeof exported !== "function") throw new InputError(`${where}.class_name: the export is not a class`);
      cls = exported as InteractionClass;
    }
    if (!cls) {
      throw new InputError(`${where}.class_name: unknown interaction class ${JSON.stringify(entry.class_name)}`, {
        hint: `built-ins: ${Object.keys(BUILTIN_INTERACTION_CLASSES).join(", ")}; or a .js module path in this YAML's folder`,
      });
    }
    let instance: unknown;
    try {
      instance = new cls(config);
    } catch (err) {
      throw new InputError(`${where}: constructing ${entry.class_name} failed: ${(err as Error).message}`, { cause: err });
    }
    registry.add(name, validateInteraction(instance, where), where);
  }
  return registry;
}

export async function loadInteractionRegistry(file: string, options: LoadInteractionsOptions = {}): Promise<InteractionRegistry> {
  return parseInteractionFile(await readYamlFile(file), file, options);
}
