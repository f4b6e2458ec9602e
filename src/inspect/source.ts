/**
 * What PATH names: a trajectory file (parquet, JSONL, or an unfinished `.parquet.parts` folder) or a run folder
 * (docs/run-folder.md: metrics.jsonl and rollouts/step-NNNNNN.parquet). Reading is streamed; a file that is not
 * a trajectory file becomes an InputError naming it (exit 2).
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import { load as loadYaml } from "js-yaml";
import { z } from "zod";
import { AgentrlError, InputError } from "../errors.js";
import { formatIssues } from "../zod-issues.js";
import { describeFileError } from "../data/input-file.js";
import { readJsonLines } from "../data/jsonl.js";
import { readTrajectories } from "../data/trajectory-store.js";
import type { Trajectory } from "../data/trajectory.js";

export type Source = { kind: "file"; file: string } | { kind: "run"; dir: string };

export async function resolveSource(input: string): Promise<Source> {
  const stat = await fs.stat(input).catch((err: unknown) => {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw describeFileError(input, err);
    throw new InputError(`${input}: no such file or folder`, { hint: "give a trajectory file (.parquet, .jsonl) or a run folder" });
  });
  if (stat.isFile()) return { kind: "file", file: input };
  if (input.replace(/\/+$/, "").endsWith(".parquet.parts")) return { kind: "file", file: input.replace(/\/+$/, "") };
  const hasMetrics = await exists(path.join(input, "metrics.jsonl"));
  const hasRollouts = await exists(path.join(input, "rollouts"));
  if (hasMetrics || hasRollouts) return { kind: "run", dir: input };
  throw new InputError(`${input}: a folder that is neither a run folder nor a .parquet.parts folder`, {
    hint: "a run folder holds metrics.jsonl and rollouts/ (docs/run-folder.md)",
  });
}

async function exists(p: string): Promise<boolean> {
  return fs.stat(p).then(() => true, () => false);
}

/**
 * Streams the trajectories of a file, turning failures of the file format (a parquet that is not a parquet, a
 * text file with a .jsonl name) into InputErrors that name the file.
 */
export async function* streamTrajectories(file: string): AsyncGenerator<Trajectory> {
  let read = 0;
  try {
    for await (const t of readTrajectories(file)) {
      read += 1;
      yield t;
    }
  } catch (err) {
    // A bad first record means the whole file is something else; a later one is a damaged row, named as such.
    if (err instanceof AgentrlError && (read > 0 || /not a trajectory file|no such file|permission denied|not valid UTF-8/.test(err.message))) throw err;
    const full = err instanceof AgentrlError ? err.message : `${(err as Error).message ?? err}`;
    const why = full.length > 300 ? `${full.slice(0, 300)}…` : full;
    throw new InputError(`${file}: not a trajectory file (${why})`, { cause: err, hint: "give a trajectory file written by agentrl rollout or train, or a run folder" });
  }
}

// ---- run folders ----

export const stepFileName = (step: number) => `step-${String(step).padStart(6, "0")}`;

/** Steps that have rollouts in the run folder, ascending. */
export async function rolloutSteps(dir: string): Promise<number[]> {
  const names = await fs.readdir(path.join(dir, "rollouts")).catch(() => [] as string[]);
  const steps = new Set<number>();
  for (const name of names) {
    const match = /^step-(\d+)\.(parquet|parquet\.parts|jsonl)$/.exec(name);
    if (match) steps.add(Number(match[1]));
  }
  return [...steps].sort((a, b) => a - b);
}

/** The trajectory file of one training step: finished parquet, an unfinished one, or JSONL. */
export async function stepRolloutFile(dir: string, step: number): Promise<string> {
  const base = path.join(dir, "rollouts", stepFileName(step));
  for (const candidate of [`${base}.parquet`, `${base}.parquet.parts`, `${base}.jsonl`]) {
    if (await exists(candidate)) return candidate.endsWith(".parts") ? `${base}.parquet` : candidate;
  }
  const steps = await rolloutSteps(dir);
  throw new InputError(`${dir}: no rollouts for step ${step} (looked for rollouts/${stepFileName(step)}.parquet)`, {
    hint: steps.length ? `steps with rollouts: ${describeSteps(steps)}` : "this run folder has no rollouts yet",
  });
}

export function describeSteps(steps: readonly number[]): string {
  if (steps.length <= 12) return steps.join(", ");
  return `${steps.slice(0, 5).join(", ")}, ..., ${steps.slice(-5).join(", ")} (${steps.length} steps)`;
}

const metricsLineSchema = z
  .object({ step: z.number().int() })
  .catchall(z.union([z.number(), z.string(), z.boolean(), z.null()]));

export interface MetricsRow {
  step: number;
  values: Record<string, number>;
}

/**
 * metrics.jsonl as one row per step: lines for the same step (training and validation) merge, later keys win.
 * Only numeric values are kept; a missing key means "not measured at this step".
 */
export async function readMetrics(dir: string): Promise<MetricsRow[]> {
  const file = path.join(dir, "metrics.jsonl");
  if (!(await exists(file))) return [];
  const bySteps = new Map<number, Record<string, number>>();
  for await (const { line, value, error } of readJsonLines(file)) {
    if (error) throw new InputError(`${file}:${line}: ${error}`);
    const parsed = metricsLineSchema.safeParse(value);
    if (!parsed.success) {
      throw new InputError(`${file}:${line}: ${formatIssues(parsed.error, { only: "first" })}`);
    }
    const values = bySteps.get(parsed.data.step) ?? {};
    for (const [key, v] of Object.entries(parsed.data)) {
      if (key !== "step" && typeof v === "number" && Number.isFinite(v)) values[key] = v;
    }
    bySteps.set(parsed.data.step, values);
  }
  return [...bySteps].sort((a, b) => a[0] - b[0]).map(([step, values]) => ({ step, values }));
}

/** The model folder a run trained (config.yaml actor_rollout_ref.model.path), to decode tokens; null if unknown. */
export async function runModelPath(dir: string): Promise<string | null> {
  const text = await fs.readFile(path.join(dir, "config.yaml"), "utf8").catch(() => null);
  if (text === null) return null;
  try {
    const config = loadYaml(text) as { actor_rollout_ref?: { model?: { path?: unknown } } } | null;
    const modelPath = config?.actor_rollout_ref?.model?.path;
    return typeof modelPath === "string" ? modelPath : null;
  } catch {
    return null;
  }
}
