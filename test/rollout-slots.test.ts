import v8 from "node:v8";
import vm from "node:vm";
import { describe, expect, it } from "vitest";
import { runRollout, type TrajectoryExecutor } from "../src/rollout/run-rollout.js";
import type { TrajectoryWriter } from "../src/data/trajectory-store.js";
import type { Trajectory } from "../src/data/trajectory.js";
import type { Prompt } from "../src/rollout/sample.js";
import { makeTrajectory } from "./helpers/trajectories.js";

const prompt = (dataIndex: number): Prompt => ({
  dataIndex,
  row: { data_source: "openai/gsm8k", prompt: [{ role: "user", content: `question ${dataIndex}` }], reward_model: { ground_truth: "1" } },
});

/** A writer that keeps nothing, as the parquet writer keeps only typed copies of what it needs. */
const discardingWriter = (): TrajectoryWriter => ({
  file: "discarded.parquet",
  existingIds: new Set(),
  removedFailed: 0,
  keptFailed: 0,
  written: 0,
  write: async () => undefined,
  settled: async () => undefined,
  close: async () => undefined,
});

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe("rollout slots", () => {
  it("a slot lets go of its finished trajectory while it runs the next one", async () => {
    v8.setFlagsFromString("--expose-gc");
    const gc = vm.runInNewContext("gc") as () => void;
    let first: WeakRef<Trajectory> | undefined;
    let finishSecond!: (t: Trajectory) => void;
    let secondStarted!: () => void;
    const started = new Promise<void>((resolve) => (secondStarted = resolve));
    const executor: TrajectoryExecutor = () => (sample) => {
      if (sample.dataIndex === 0) {
        const trajectory = makeTrajectory(0);
        first = new WeakRef(trajectory);
        return Promise.resolve(trajectory);
      }
      secondStarted();
      return new Promise((resolve) => (finishSecond = resolve));
    };
    const run = runRollout({ prompts: [prompt(0), prompt(1)], n: 1, concurrency: 1, executor, writer: discardingWriter() });
    await started;
    await nextTurn();
    gc();
    await nextTurn();
    // Recorded and written, the first trajectory is garbage: a slot holding it for its next trajectory's whole life
    // kept a finished record per slot alive (at 256 slots, most of what each garbage collection had to copy).
    expect(first!.deref()).toBeUndefined();
    finishSecond(makeTrajectory(1));
    const result = await run;
    expect(result.stats.count).toBe(2);
  });
});
