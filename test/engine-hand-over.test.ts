/**
 * Engine answers are handed to their callers together (src/engine/hand-over.ts): everything settled in one turn of
 * the event loop goes over in that turn's check phase, in the order settled, and not a moment before.
 */
import { describe, expect, it } from "vitest";
import { handOverTogether } from "../src/engine/hand-over.js";

const checkPhase = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("handOverTogether", () => {
  it("hands over in the check phase, not at once or in a microtask", async () => {
    const got: string[] = [];
    handOverTogether((value: string) => got.push(value), "a");
    expect(got).toEqual([]);
    await Promise.resolve();
    await Promise.resolve();
    expect(got).toEqual([]);
    await checkPhase();
    expect(got).toEqual(["a"]);
  });

  it("hands over everything settled in one turn in one batch, in order, before a check-phase callback queued after them", async () => {
    const got: string[] = [];
    const deliver = (value: string) => got.push(value);
    for (const value of ["first", "second", "third"]) handOverTogether(deliver, value);
    let seenByLaterCallback: string[] = [];
    setImmediate(() => (seenByLaterCallback = [...got]));
    await checkPhase();
    expect(seenByLaterCallback).toEqual(["first", "second", "third"]);
  });

  it("a value settled while a batch is handed over goes in the next batch", async () => {
    const got: string[] = [];
    const deliver = (value: string) => {
      got.push(value);
      if (value === "early") handOverTogether(deliver, "late");
    };
    handOverTogether(deliver, "early");
    let afterFirstBatch: string[] = [];
    setImmediate(() => (afterFirstBatch = [...got]));
    await checkPhase();
    expect(afterFirstBatch).toEqual(["early"]);
    await checkPhase();
    expect(got).toEqual(["early", "late"]);
  });
});
