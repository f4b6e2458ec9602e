/**
 * The scheduler's generator in `agentrl train`: a step's whole batch (rollout.ts's rolloutBatch, with dynamic
 * sampling rounds) for sync and one_step_off, one prompt's group for fully_async. Every draw from the data cursor
 * stays pending (pending-draws.ts) until the trainer takes the batch it went into.
 */
import type { Prompt } from "../rollout/sample.js";
import { Semaphore } from "../tools/index.js";
import type { DataCursor } from "./data-cursor.js";
import type { PendingDraws } from "./pending-draws.js";
import type { TrainReporter } from "./reporter.js";
import { assembleBatch, rolloutBatch, rolloutGroup, type BatchPlan, type RolloutBatch, type StepRollout } from "./rollout.js";
import type { Generator } from "./schedule/index.js";

export interface TrainGenerator extends Generator<RolloutBatch, RolloutBatch> {
  /** The trainer took `batch`: its prompts are no longer pending. */
  taken(batch: RolloutBatch): void;
}

export interface GenerationDeps {
  prompts: readonly Prompt[];
  cursor: DataCursor;
  draws: PendingDraws;
  rollout: StepRollout;
  plan: BatchPlan;
  reporter: TrainReporter;
  /** rollout.max_concurrency: trajectories in flight across all of fully_async's groups. */
  maxConcurrency: number;
  /** The engine client's busy seconds so far (SglangClient.busySeconds), read around each generation window. */
  engineBusy?: () => number;
}

export function trainGenerator(deps: GenerationDeps): TrainGenerator {
  const { prompts, cursor, draws, rollout, plan, reporter, maxConcurrency } = deps;
  const engineBusy = deps.engineBusy ?? (() => 0);
  const tickets = new WeakMap<RolloutBatch, number[]>();
  const slots = new Semaphore(Math.max(1, maxConcurrency));
  let groups = 0;
  let handedAt = performance.now();
  let busyAtHanded = engineBusy();
  return {
    async batch(step, signal) {
      const ticket = draws.add();
      reporter.phase(step, "rollout");
      const batch = await rolloutBatch(step, { prompts, cursor }, rollout, plan, signal, engineBusy);
      tickets.set(batch, [ticket]);
      return batch;
    },
    size: (batch) => batch.keptGroups,
    async group(step, signal) {
      const ticket = draws.add();
      const index = cursor.next(1)[0]!;
      // Group ids stay unique across steps: a group is generated for one step and may be trained in a later one.
      const result = await rolloutGroup(step, { ...prompts[index]!, groupId: `${step}.g${groups++}` }, rollout, plan, { signal, slots });
      tickets.set(result.value, [ticket]);
      return result;
    },
    assemble(_step, kept, discarded) {
      const now = performance.now();
      const busy = engineBusy();
      const batch = assembleBatch(kept, discarded, (now - handedAt) / 1000, busy - busyAtHanded);
      handedAt = now;
      busyAtHanded = busy;
      tickets.set(batch, [...kept, ...discarded].flatMap((group) => tickets.get(group) ?? []));
      return batch;
    },
    taken(batch) {
      for (const ticket of tickets.get(batch) ?? []) draws.settle(ticket);
    },
  };
}
