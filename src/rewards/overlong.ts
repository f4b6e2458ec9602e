/**
 * DAPO's overlong reward shaping (verl's reward_model.overlong_buffer, its DAPO reward manager): a response whose
 * length runs into the last `len` tokens of data.max_response_length loses reward linearly, up to `penalty_factor`
 * at the budget itself. The length is the whole response, every token after the prompt, as verl counts it.
 */
import { z } from "zod";

export const overlongBufferSchema = z
  .strictObject({
    enable: z.boolean().default(false).describe("penalise responses that run into the last `len` tokens of data.max_response_length (DAPO)"),
    len: z.number().int().positive().default(1024).describe("tokens before the response budget where the penalty starts"),
    penalty_factor: z.number().nonnegative().default(1.0).describe("the penalty at the budget itself; 0 at max_response_length - len"),
    log: z.boolean().default(false).describe("record overlong_reward and overlong in each trajectory's reward_extra"),
  })
  .describe("reward_model.overlong_buffer");
export type OverlongBuffer = z.infer<typeof overlongBufferSchema>;

/** The reward added for a response of `length` tokens: 0 up to max - len, then down to -penalty_factor at max. */
export function overlongReward(length: number, maxResponseLength: number, buffer: Pick<OverlongBuffer, "len" | "penalty_factor">): number {
  const exceed = length - (maxResponseLength - buffer.len);
  return exceed <= 0 ? 0 : (-exceed / buffer.len) * buffer.penalty_factor;
}
