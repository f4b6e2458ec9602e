/**
 * The fan-out every trajectory in flight uses to hear the run's abort (src/signal-fanout.ts): one listener on the
 * signal however many subscribe, each subscriber called once with the reason, an unsubscribed one never.
 */
import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { onAbort } from "../src/signal-fanout.js";

describe("onAbort", () => {
  it("puts one listener on the signal for any number of subscribers, and calls each with the reason", () => {
    const controller = new AbortController();
    const heard: unknown[] = [];
    const unsubscribe = Array.from({ length: 5000 }, (_, i) => onAbort(controller.signal, (reason) => heard.push([i, reason])));
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(1);
    for (let i = 0; i < 5000; i += 2) unsubscribe[i]!();
    controller.abort("stop");
    expect(heard).toHaveLength(2500);
    expect(heard[0]).toEqual([1, "stop"]);
    expect(heard.every((entry) => (entry as [number, unknown])[0] % 2 === 1)).toBe(true);
  });

  it("calls a subscriber of an aborted signal at once; a listener subscribed twice is unsubscribed one subscription at a time", () => {
    const aborted = AbortSignal.abort("gone");
    const reasons: unknown[] = [];
    onAbort(aborted, (reason) => reasons.push(reason));
    expect(reasons).toEqual(["gone"]);
    const controller = new AbortController();
    const listener = (reason: unknown) => reasons.push(reason);
    onAbort(controller.signal, listener);
    const second = onAbort(controller.signal, listener);
    second();
    controller.abort("once");
    expect(reasons).toEqual(["gone", "once"]);
  });

  it("a subscription made after the abort still hears it, and a signal aborted twice calls nobody again", () => {
    const controller = new AbortController();
    let calls = 0;
    onAbort(controller.signal, () => calls++);
    controller.abort();
    onAbort(controller.signal, () => calls++);
    controller.abort();
    expect(calls).toBe(2);
  });
});
