/**
 * DAPO's overlong reward shaping (reward_model.overlong_buffer, as verl's DAPO reward manager computes it): nothing up
 * to max_response_length - len, then a linear penalty down to -penalty_factor at the budget; added to the reward of
 * a trajectory as it is recorded, with overlong_reward and overlong in reward_extra when logged.
 */
import { describe, expect, it } from "vitest";
import { overlongReward } from "../src/rewards/index.js";
import { trainConfigSchema } from "../src/train/config.js";

describe("overlong reward", () => {
  const buffer = { len: 100, penalty_factor: 1 };

  it("is 0 up to the buffer, then falls linearly to -penalty_factor at the budget", () => {
    expect(overlongReward(0, 500, buffer)).toBe(0);
    expect(overlongReward(400, 500, buffer)).toBe(0);
    expect(overlongReward(450, 500, buffer)).toBeCloseTo(-0.5);
    expect(overlongReward(500, 500, buffer)).toBeCloseTo(-1);
    expect(overlongReward(450, 500, { len: 100, penalty_factor: 0.2 })).toBeCloseTo(-0.1);
  });

  it("is off by default, and verl's keys configure it", () => {
    const base = { data: { train_files: "t.parquet" }, actor_rollout_ref: { model: { path: "m" } } };
    expect(trainConfigSchema.parse(base).reward_model.overlong_buffer.enable).toBe(false);
    const dapo = trainConfigSchema.parse({ ...base, reward_model: { overlong_buffer: { enable: true, len: 4096, penalty_factor: 1.0, log: false } } });
    expect(dapo.reward_model.overlong_buffer).toEqual({ enable: true, len: 4096, penalty_factor: 1.0, log: false });
  });
});
