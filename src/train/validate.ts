/**
 * The validation stage: the validation prompts rolled out with val_kwargs into the step's val-NNNNNN file, read back
 * and scored (validationMetrics: reward and accuracy per data source, pass@n).
 */
import { openTrajectoryWriter, readTrajectories } from "../data/trajectory-store.js";
import type { Trajectory } from "../data/trajectory.js";
import type { Prompt } from "../rollout/sample.js";
import type { RunDir } from "./run-dir.js";
import type { TrainReporter } from "./reporter.js";
import type { StepRollout } from "./rollout.js";
import { validationMetrics } from "./step-metrics.js";

export async function validate(
  step: number,
  prompts: Prompt[],
  rollout: StepRollout,
  options: { n: number; runDir: RunDir; reporter: TrainReporter; onTrajectories?: (step: number, trajectories: readonly Trajectory[]) => void },
): Promise<Record<string, number>> {
  if (prompts.length === 0) return {};
  options.reporter.phase(step, "validate");
  const file = options.runDir.rolloutFile(step, "val");
  const writer = await openTrajectoryWriter(file, { force: true });
  await rollout(step, prompts, { writer });
  await writer.close();
  const collected: Trajectory[] = [];
  for await (const t of readTrajectories(file)) collected.push(t);
  options.onTrajectories?.(step, collected);
  const metrics = validationMetrics(collected, options.n);
  options.reporter.validationDone(step, metrics);
  return metrics;
}
