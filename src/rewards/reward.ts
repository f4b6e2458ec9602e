/**
 * The trajectory's final reward: verl's default scorer routed by `data_source`, or a user's reward module.
 * The record keeps every part (outcome score, tool step rewards, interaction turn scores) because verl exposes
 * them separately and only the outcome score becomes the training reward by default.
 */
import path from "node:path";
import { pathToFileURL } from "node:url";
import { z } from "zod";
import { InputError } from "../errors.js";
import { computeScore } from "./gsm8k.js";
import { scoreVault } from "./vault.js";

/** What a reward function sees; the names follow verl's `compute_score(data_source, solution_str, ground_truth, extra_info)`. */
export interface RewardInput {
  dataSource: string;
  /** The decoded response (verl: the whole response, tool and user turns included, special tokens skipped). */
  responseText: string;
  groundTruth: string;
  extraInfo: Record<string, unknown>;
  /** Step rewards returned by tool calls, in call order. */
  toolRewards: number[];
  /** Interaction turn scores, in turn order. */
  turnScores: number[];
}

/** A user reward module returns a number, or an object with a numeric `score` and any extra fields to record. */
export type RewardFunction = (input: RewardInput) => number | RewardResultObject | Promise<number | RewardResultObject>;
export interface RewardResultObject {
  score: number;
  [key: string]: unknown;
}

export interface RewardRecord {
  /** The outcome score that becomes the training reward. */
  score: number;
  /** "builtin:openai/gsm8k" or "module:<path>". */
  source: string;
  toolRewards: number[];
  turnScores: number[];
  /** Extra fields a user module returned next to `score` (verl records them as reward_extra_info). */
  extra: Record<string, unknown>;
}

/**
 * data_source → built-in scorer; verl's `default_compute_score` scores openai/gsm8k with strict, 1.0/0.0.
 * agentrl/vault is the CPU demo's synthetic task (it also reads the tool step rewards).
 */
const BUILTIN_SCORERS: Record<string, (responseText: string, groundTruth: string, input: RewardInput) => number> = {
  "openai/gsm8k": (responseText, groundTruth) => computeScore(responseText, groundTruth, "strict", 0.0, 1.0),
  "agentrl/vault": (responseText, groundTruth, input) => scoreVault(responseText, groundTruth, input.toolRewards).score,
};

export function hasBuiltinScorer(dataSource: string): boolean {
  return Object.hasOwn(BUILTIN_SCORERS, dataSource);
}

const resultSchema = z.union([
  z.number().refine(Number.isFinite, "must be a finite number"),
  z.looseObject({ score: z.number().refine(Number.isFinite, "must be a finite number") }),
]);

/**
 * Scores one trajectory. With `userFunction`, the user's module decides for every data source; otherwise the
 * built-in scorer for `dataSource` does, and an unknown data source is an input error (verl raises too).
 */
export async function computeReward(
  input: RewardInput,
  userFunction?: { fn: RewardFunction; modulePath: string },
): Promise<RewardRecord> {
  const base = { toolRewards: [...input.toolRewards], turnScores: [...input.turnScores] };
  if (userFunction) {
    const raw = await userFunction.fn(input);
    const parsed = resultSchema.safeParse(raw);
    if (!parsed.success) {
      throw new InputError(
        `reward module ${userFunction.modulePath}: computeScore returned ${describeValue(raw)}; expected a finite number or {score: number, ...}`,
      );
    }
    if (typeof parsed.data === "number") {
      return { score: parsed.data, source: `module:${userFunction.modulePath}`, ...base, extra: {} };
    }
    const { score, ...extra } = parsed.data;
    return { score, source: `module:${userFunction.modulePath}`, ...base, extra };
  }
  const scorer = BUILTIN_SCORERS[input.dataSource];
  if (!scorer) {
    throw new InputError(`no built-in reward for data_source ${JSON.stringify(input.dataSource)}`, {
      hint: `built-in: ${Object.keys(BUILTIN_SCORERS).join(", ")}; pass a reward module for other data sources`,
    });
  }
  return { score: scorer(input.responseText, input.groundTruth, input), source: `builtin:${input.dataSource}`, ...base, extra: {} };
}

/**
 * Loads a user's reward module (a .js/.mjs file exporting `computeScore`, or a default export that is one).
 * TypeScript files must be compiled first: Node 20 cannot import .ts.
 */
export async function loadRewardModule(modulePath: string, cwd = process.cwd()): Promise<{ fn: RewardFunction; modulePath: string }> {
  const absolute = path.resolve(cwd, modulePath);
  if (/\.(c|m)?ts$/.test(absolute)) {
    throw new InputError(`reward module ${modulePath}: TypeScript modules cannot be loaded by Node 20`, {
      hint: "compile it to .js (npx tsc) and pass the .js file",
    });
  }
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(absolute).href)) as Record<string, unknown>;
  } catch (err) {
    throw new InputError(`reward module ${modulePath}: cannot be loaded: ${(err as Error).message}`, { cause: err });
  }
  const candidate = mod["computeScore"] ?? (mod["default"] as Record<string, unknown> | undefined)?.["computeScore"] ?? mod["default"];
  if (typeof candidate !== "function") {
    throw new InputError(`reward module ${modulePath}: no exported function computeScore`, {
      hint: "export async function computeScore({ dataSource, responseText, groundTruth, extraInfo }) { return 1.0; }",
    });
  }
  return { fn: candidate as RewardFunction, modulePath };
}

function describeValue(value: unknown): string {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? String(value) : text.slice(0, 200);
  } catch {
    return String(value);
  }
}
