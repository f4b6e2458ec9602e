/**
 * /generate responses skip zod when they have the usual shape (src/engine/wire.ts, usualGenerateResponse). That hand
 * check must never accept what the schema refuses, and must hand over exactly what the schema would: compared here
 * on the usual answers and on thousands of random mutations of them (wrong types, missing and extra keys, aborts,
 * non-integers, odd logprob entries). The usual answers must take the fast path, or it would be dead code.
 */
import { describe, expect, it } from "vitest";
import { generateResponseSchema, parseGenerateResponse, usualGenerateResponse } from "../src/engine/wire.js";
import { seededRandom } from "../src/data/random.js";
import { mutateOnePlace } from "./helpers/mutate.js";

function usual(random: () => number): Record<string, unknown> {
  const n = Math.floor(random() * 5);
  const ids = Array.from({ length: n }, () => Math.floor(random() * 151_000));
  const finish = random() < 0.7 ? { type: "stop", matched: random() < 0.5 ? 151645 : random() < 0.5 ? "</x>" : null } : { type: "length", length: n };
  return {
    text: "ignored",
    output_ids: ids,
    meta_info: {
      id: `rid-${n}`,
      finish_reason: finish,
      prompt_tokens: 12,
      completion_tokens: n,
      cached_tokens: random() < 0.5 ? 3 : undefined,
      weight_version: random() < 0.5 ? "7" : null,
      e2e_latency: random() < 0.5 ? 0.25 : undefined,
      output_token_logprobs: ids.map((id) => [-random(), id, random() < 0.5 ? null : "tok"]),
      spec_verify_ct: 0,
    },
  };
}

const ODD_VALUES: unknown[] = [undefined, null, 0, -1, 1.5, NaN, Infinity, 2 ** 60, "", "7", true, [], {}, [1, 2], [[0, 1, null]], { type: "abort" }];

const mutate = (value: unknown, random: () => number): unknown => mutateOnePlace(value, random, ODD_VALUES);

describe("usual /generate responses without zod", () => {
  it("takes the fast path for the usual answers, with the schema's result", () => {
    const random = seededRandom(7);
    for (let i = 0; i < 500; i++) {
      const response = usual(random);
      const fast = usualGenerateResponse(response);
      expect(fast).toBeDefined();
      const slow = generateResponseSchema.safeParse(response);
      expect(slow.success).toBe(true);
      expect(fast).toEqual(slow.data);
    }
  });

  it("never accepts what the schema refuses, and agrees with it on 20,000 mutated answers", () => {
    const random = seededRandom(11);
    let fastAccepted = 0;
    let refused = 0;
    for (let i = 0; i < 20_000; i++) {
      const response = mutate(usual(random), random);
      const slow = generateResponseSchema.safeParse(response);
      const fast = usualGenerateResponse(response);
      if (fast !== undefined) {
        fastAccepted += 1;
        expect(slow.success, JSON.stringify(response)).toBe(true);
        expect(fast).toEqual(slow.data);
      }
      if (!slow.success) refused += 1;
      // What the client calls gives the schema's verdict either way.
      const parsed = parseGenerateResponse(response);
      expect(parsed.success).toBe(slow.success);
      if (parsed.success && slow.success) expect(parsed.data).toEqual(slow.data);
    }
    // Both kinds occurred, so the comparison above exercised both sides.
    expect(fastAccepted).toBeGreaterThan(1000);
    expect(refused).toBeGreaterThan(1000);
  });
});
