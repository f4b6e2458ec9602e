/**
 * runTrajectory records the engine attempts a trajectory took as `retries`, on failure as on success: a trajectory
 * that failed after 4 attempts must say 3 retries, not 0, or a fault study reads transient faults as fatal ones.
 */
import { describe, expect, it } from "vitest";
import { runTrajectory, type TrajectoryContext } from "../src/rollout/run-trajectory.js";
import type { FakeSglangOptions } from "./fake-sglang/index.js";
import { plainSample as sample, singleTurnFixture } from "./helpers/trajectory-context.js";

const fixture = singleTurnFixture();

async function setup(faults: FakeSglangOptions["faults"], maxRetries: number): Promise<TrajectoryContext> {
  const { ctx } = await fixture.onFake({ faults }, { maxRetries, retryBaseDelayMs: 1, retryMaxDelayMs: 5, random: () => 0.5 });
  return ctx;
}

describe("runTrajectory: retries", () => {
  it("counts the attempts of a request that failed for good", async () => {
    const ctx = await setup({ queue: Array(10).fill({ type: "status", status: 503 }) }, 3);
    const t = await runTrajectory(sample, ctx);
    expect(t.status).toBe("failed");
    expect(t.finish_reason).toBe("error");
    expect(t.error).toContain("after 4 attempts");
    expect(t.retries).toBe(3);
  });

  it("counts the attempts of a request that recovered", async () => {
    const ctx = await setup({ queue: [{ type: "status", status: 503 }, { type: "reset" }] }, 3);
    const t = await runTrajectory(sample, ctx);
    expect(t.status).toBe("completed");
    expect(t.retries).toBe(2);
  });

  it("records no retries for a request that is not retryable", async () => {
    const ctx = await setup({ queue: [{ type: "status", status: 400 }] }, 3);
    const t = await runTrajectory(sample, ctx);
    expect(t.status).toBe("failed");
    expect(t.retries).toBe(0);
  });
});
