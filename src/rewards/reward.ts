/**
 * The trajectory's final reward: verl's default scorer routed by `data_source`, or a user's reward module.
 * The record keeps every part (outcome score, tool step rewards, interaction turn scores) because verl exposes
 * them separately and only the outcome score becomes the training reward by default.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { z } from "zod";
import { InputError } from "../errors.js";
import { formatIssues } from "../zod-issues.js";
import { computeScore } from "./gsm8k.js";
import { scoreVault } from "./vault.js";
import { PythonRewardPool, type PythonRewardOptions, type RewardRow } from "./python-reward.js";

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
  /**
   * The tools' calc_reward at the end of the trajectory, `{tool_name: score}` (tool_lifetime: trajectory; empty
   * otherwise): verl passes them as extra_info["rollout_reward_scores"].
   */
  toolScores: Record<string, number>;
}

/**
 * A user reward module returns a number, or an object with a numeric `score` and any extra fields to record (an `acc`
 * field, boolean or number, is the accuracy the train metrics report). It is called with the RewardInput fields plus
 * custom_reward_function.reward_kwargs, merged in with the kwargs winning (verl merges reward_kwargs into
 * compute_score's keyword arguments the same way).
 */
export type RewardFunction = (
  input: RewardInput & Record<string, unknown>,
) => number | RewardResultObject | Promise<number | RewardResultObject>;
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
  /**
   * Extra fields next to `score` (verl records them as reward_extra_info): what a user module returned, and the
   * built-in scorers' `acc` (whether the answer is correct), which the accuracy metrics read.
   */
  extra: Record<string, unknown>;
}

/** A loaded user reward function: `exportName` is the export found (custom_reward_function.name or its JS spelling). */
export interface LoadedRewardFunction {
  fn: RewardFunction;
  modulePath: string;
  exportName: string;
  /**
   * Scores with the row known (a Python reward file: its errors name the trajectory); when set, computeReward calls
   * it instead of `fn`.
   */
  score?: (input: RewardInput, rewardKwargs: Record<string, unknown>, row?: RewardRow) => Promise<number | RewardResultObject>;
  /** Stops what the function runs on (a Python file's process pool); call it once the run is over. */
  close?: () => Promise<void>;
}

/**
 * custom_reward_function.reward_kwargs the built-in scorers take (validated in the config when no module is set, so a
 * misspelled kwarg is an error, not a silent no-op). verl's default_compute_score takes none for openai/gsm8k either.
 */
export const builtinRewardKwargsSchema = z.strictObject({
  shaped: z.boolean().optional().describe("agentrl/vault: the shaped reward (call and format credit) instead of correctness only"),
});
export type BuiltinRewardKwargs = z.infer<typeof builtinRewardKwargsSchema>;

interface BuiltinScore {
  score: number;
  acc: boolean;
}

/**
 * data_source → built-in scorer; verl's `default_compute_score` scores openai/gsm8k with strict, 1.0/0.0.
 * agentrl/vault is the CPU demo's synthetic task (it also reads the tool step rewards).
 */
const BUILTIN_SCORERS: Record<string, (input: RewardInput, kwargs: BuiltinRewardKwargs) => BuiltinScore> = {
  "openai/gsm8k": ({ responseText, groundTruth }) => {
    const score = computeScore(responseText, groundTruth, "strict", 0.0, 1.0);
    return { score, acc: score >= 1 };
  },
  "agentrl/vault": ({ responseText, groundTruth, toolRewards }, kwargs) => {
    const vault = scoreVault(responseText, groundTruth, toolRewards, { shaped: kwargs.shaped ?? false });
    return { score: vault.score, acc: vault.correct };
  },
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
 * `rewardKwargs` is custom_reward_function.reward_kwargs: merged into a user function's input, or the built-in
 * scorers' options (builtinRewardKwargsSchema).
 */
export async function computeReward(
  input: RewardInput,
  userFunction?: Pick<LoadedRewardFunction, "fn" | "modulePath" | "score"> & { exportName?: string },
  rewardKwargs: Record<string, unknown> = {},
  /** The trajectory being scored, for a Python reward file's error messages. */
  row?: RewardRow,
): Promise<RewardRecord> {
  const base = { toolRewards: [...input.toolRewards], turnScores: [...input.turnScores] };
  if (userFunction) {
    const raw = userFunction.score
      ? await userFunction.score(input, rewardKwargs, row)
      : await userFunction.fn({ ...input, ...rewardKwargs });
    const parsed = resultSchema.safeParse(raw);
    if (!parsed.success) {
      throw new InputError(
        `reward module ${userFunction.modulePath}: ${userFunction.exportName ?? "computeScore"} returned ${describeValue(raw)}; expected a finite number or {score: number, ...}`,
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
  const kwargs = builtinRewardKwargsSchema.safeParse(rewardKwargs);
  if (!kwargs.success) {
    throw new InputError(`custom_reward_function.reward_kwargs: ${formatIssues(kwargs.error)}`, {
      hint: `the built-in rewards take: ${Object.keys(builtinRewardKwargsSchema.shape).join(", ")}`,
    });
  }
  const { score, acc } = scorer(input, kwargs.data);
  return { score, source: `builtin:${input.dataSource}`, ...base, extra: { acc } };
}

/** The export verl looks up when custom_reward_function.name is not set. */
export const DEFAULT_REWARD_NAME = "compute_score";

/**
 * Loads a user's reward module (a .js/.mjs file, or a .py file: see loadPythonReward) and finds the function named `name` (custom_reward_function.name).
 * With the name at verl's default, `compute_score`, a JS module may also spell it `computeScore` or make it the
 * default export (tried in that order), since that is how JS names things and how the earlier agentrl looked it up;
 * an explicitly configured name must be exported under exactly that name. TypeScript files must be compiled first:
 * Node 20 cannot import .ts.
 */
export async function loadRewardModule(
  modulePath: string,
  name: string = DEFAULT_REWARD_NAME,
  cwd = process.cwd(),
  python: PythonRewardOptions = { timeout: 60 },
): Promise<LoadedRewardFunction> {
  const absolute = path.resolve(cwd, modulePath);
  if (absolute.endsWith(".py")) return loadPythonReward(modulePath, absolute, name, python);
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
  // A CommonJS module's exports arrive as the default export's properties.
  const defaultExport = mod["default"];
  const inDefault = (key: string): unknown =>
    defaultExport !== null && (typeof defaultExport === "object" || typeof defaultExport === "function")
      ? (defaultExport as Record<string, unknown>)[key]
      : undefined;
  const tries: Array<[string, unknown]> = [[name, mod[name] ?? inDefault(name)]];
  if (name === DEFAULT_REWARD_NAME) tries.push(["computeScore", mod["computeScore"] ?? inDefault("computeScore")], ["default", defaultExport]);
  const found = tries.find(([, value]) => typeof value === "function");
  if (!found) {
    const functions = exportedFunctions(mod);
    const named = name === DEFAULT_REWARD_NAME ? `${name} (or computeScore, or a default export)` : name;
    throw new InputError(
      `reward module ${modulePath}: no exported function ${named} (custom_reward_function.name); ` +
        (functions.length ? `it exports: ${functions.join(", ")}` : "it exports no functions"),
      { hint: `export async function ${name}({ dataSource, responseText, groundTruth, extraInfo }) { return 1.0; }, or set custom_reward_function.name` },
    );
  }
  return { fn: found[1] as RewardFunction, modulePath, exportName: found[0] };
}

/**
 * A Python reward file, verl's way: `name(data_source, solution_str, ground_truth, extra_info, **reward_kwargs)`
 * returning a float or a dict with `score` (the other keys are reward_extra_info), run on a pool of Python processes
 * started here, so a syntax error or a missing function fails before any rollout. extra_info is the row's, plus the
 * trajectory's `tool_rewards`, `turn_scores` and, as verl's reward managers add it, `rollout_reward_scores` (the
 * tools' calc_reward).
 */
async function loadPythonReward(modulePath: string, absolute: string, name: string, python: PythonRewardOptions): Promise<LoadedRewardFunction> {
  if (!existsSync(absolute)) throw new InputError(`reward file ${modulePath}: no such file`);
  const pool = await PythonRewardPool.start(absolute, name, python);
  const score = async (input: RewardInput, rewardKwargs: Record<string, unknown>, row?: RewardRow): Promise<RewardResultObject> => {
    const { score: value, extra } = await pool.call(
      {
        data_source: input.dataSource,
        solution_str: input.responseText,
        ground_truth: input.groundTruth,
        extra_info: { ...input.extraInfo, tool_rewards: input.toolRewards, turn_scores: input.turnScores, rollout_reward_scores: input.toolScores },
        reward_kwargs: rewardKwargs,
      },
      row,
    );
    return { ...extra, score: value };
  };
  // Called without the split (as a JS function is): the known fields are the input, the rest reward_kwargs.
  const fn: RewardFunction = ({ dataSource, responseText, groundTruth, extraInfo, toolRewards, turnScores, toolScores, ...kwargs }) =>
    score({ dataSource, responseText, groundTruth, extraInfo, toolRewards, turnScores, toolScores }, kwargs);
  return { fn, score, modulePath, exportName: name, close: () => pool.close() };
}

/** The names of a module's exported functions (a CommonJS module's too), for "no such function" errors. */
function exportedFunctions(mod: Record<string, unknown>): string[] {
  const names = new Set<string>();
  for (const [key, value] of Object.entries(mod)) if (typeof value === "function") names.add(key);
  const defaultExport = mod["default"];
  if (defaultExport !== null && typeof defaultExport === "object") {
    for (const [key, value] of Object.entries(defaultExport)) if (typeof value === "function") names.add(key);
  }
  return [...names].sort();
}

function describeValue(value: unknown): string {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? String(value) : text.slice(0, 200);
  } catch {
    return String(value);
  }
}
