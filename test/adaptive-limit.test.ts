import { describe, expect, it } from "vitest";
import { AdaptiveLimit, type Slot } from "../src/engine/adaptive-limit.js";

/** A limit on a fake clock: `advance` moves time, so latencies are exact. */
function limitOf(max: number, requestTimeoutMs = 1000, enabled = true) {
  let now = 0;
  const limit = new AdaptiveLimit({ max, requestTimeoutMs, enabled, now: () => now });
  return { limit, advance: (ms: number) => (now += ms) };
}

async function takeAll(limit: AdaptiveLimit, count: number): Promise<Slot[]> {
  const slots: Slot[] = [];
  for (let i = 0; i < count; i++) slots.push((await limit.acquire())!);
  return slots;
}

describe("AdaptiveLimit", () => {
  it("admits up to the limit at once and the rest first come, first served", async () => {
    const { limit } = limitOf(2);
    const [a, b] = await takeAll(limit, 2);
    const order: string[] = [];
    const third = limit.acquire().then((slot) => (order.push("third"), slot));
    const fourth = limit.acquire().then((slot) => (order.push("fourth"), slot));
    await Promise.resolve();
    expect(order).toEqual([]);
    expect(limit.stats().waiting).toBe(2);
    a!.release("ok");
    await third;
    expect(order).toEqual(["third"]);
    b!.release("ok");
    await fourth;
    expect(order).toEqual(["third", "fourth"]);
  });

  it("halves on 429/503 and on timeouts while answers are slow, once per round", async () => {
    const { limit, advance } = limitOf(32);
    const slots = await takeAll(limit, 32);
    // The whole round times out: one decrease, not 32.
    advance(1000);
    for (const slot of slots) slot.release("timeout");
    expect(limit.limit).toBe(16);
    expect(limit.stats()).toMatchObject({ lowest: 16, decreases: 1 });
    // An attempt sent after that decrease may cut again.
    const [next] = await takeAll(limit, 1);
    next!.release("overloaded");
    expect(limit.limit).toBe(8);
  });

  it("does not cut for a timeout while other answers are fast (one stuck request, not load)", async () => {
    const { limit, advance } = limitOf(8);
    for (let i = 0; i < 20; i++) {
      const [slot] = await takeAll(limit, 1);
      advance(10);
      slot!.release("ok");
    }
    const [stuck] = await takeAll(limit, 1);
    advance(1000);
    stuck!.release("timeout");
    expect(limit.limit).toBe(8);
    expect(limit.stats().decreases).toBe(0);
  });

  it("climbs back by about one per round of successes, up to the max", async () => {
    const { limit, advance } = limitOf(8);
    const [first] = await takeAll(limit, 1);
    first!.release("overloaded");
    expect(limit.limit).toBe(4);
    for (let round = 0; round < 4; round++) {
      const slots = await takeAll(limit, limit.limit);
      advance(10);
      for (const slot of slots) slot.release("ok");
    }
    expect(limit.limit).toBeGreaterThanOrEqual(7);
    for (let i = 0; i < 100; i++) (await limit.acquire())!.release("ok");
    expect(limit.limit).toBe(8);
  });

  it("never goes below one", async () => {
    const { limit } = limitOf(4);
    for (let i = 0; i < 10; i++) (await limit.acquire())!.release("overloaded");
    expect(limit.limit).toBe(1);
  });

  it("ignores neutral answers (resets, 500s)", async () => {
    const { limit } = limitOf(4);
    for (let i = 0; i < 10; i++) (await limit.acquire())!.release("neutral");
    expect(limit.limit).toBe(4);
  });

  it("gives a waiter whose signal aborts null and drops it from the queue", async () => {
    const { limit } = limitOf(1);
    const [held] = await takeAll(limit, 1);
    const controller = new AbortController();
    const waiting = limit.acquire(controller.signal);
    controller.abort();
    expect(await waiting).toBeNull();
    expect(limit.stats().waiting).toBe(0);
    held!.release("ok");
    expect(await limit.acquire()).not.toBeNull();
  });

  it("when disabled, never makes anyone wait and never cuts", async () => {
    const { limit } = limitOf(2, 1000, false);
    const slots = await takeAll(limit, 10);
    for (const slot of slots) slot.release("overloaded");
    expect(limit.limit).toBe(2);
    expect(limit.stats().decreases).toBe(0);
  });
});
