import v8 from "node:v8";
import { describe, expect, it } from "vitest";
import { boundContext } from "../src/rollout/run-rollout.js";
import type { TrajectoryContext } from "../src/rollout/trajectory-state.js";

type Unbound = Omit<TrajectoryContext, "signal">;

/** V8's %HaveSameMap: whether two objects share one hidden class (optimized code checks exactly this). */
function sameHiddenClass(a: object, b: object): boolean {
  v8.setFlagsFromString("--allow-natives-syntax");
  // Compiled after the flag is set, so the natives syntax parses.
  return new Function("a", "b", "return %HaveSameMap(a, b)")(a, b) as boolean;
}

// Stand-ins: boundContext copies references, it never looks inside them.
const unbound = (extra: Partial<Unbound> = {}): Unbound =>
  ({
    model: {},
    client: {},
    parser: {},
    tools: undefined,
    toolSchemas: [],
    interactions: undefined,
    rewardFunction: undefined,
    rollout: {},
    maxPromptLength: 1024,
    maxResponseLength: 512,
    ...extra,
  }) as unknown as Unbound;

describe("the context a rollout's trajectories run in", () => {
  it("has one hidden class whatever optional fields the caller set (train's step and priority, validation's greedy)", () => {
    const signal = new AbortController().signal;
    const plain = boundContext(unbound(), signal);
    const train = boundContext({ ...unbound({ step: 3 }), priority: -3 }, signal);
    const validation = boundContext(unbound({ step: 3, greedy: true, warn: () => undefined }), new AbortController().signal);
    expect(sameHiddenClass(plain, train)).toBe(true);
    expect(sameHiddenClass(plain, validation)).toBe(true);
    // What the spread it replaced gave: a class per set of fields, so the functions reading it were compiled again.
    expect(sameHiddenClass({ ...unbound(), signal }, { ...unbound({ step: 3 }), signal })).toBe(false);
  });

  it("keeps every field of the context and adds the run's signal", () => {
    const signal = new AbortController().signal;
    const warn = () => undefined;
    const context = unbound({ step: 7, greedy: true, priority: -7, warn, rewardKwargs: { scale: 2 } });
    const bound = boundContext(context, signal);
    expect(bound).toEqual({ ...context, signal });
    expect(bound.signal).toBe(signal);
    expect(bound.warn).toBe(warn);
    expect(bound.model).toBe(context.model);
  });
});
