import { describe, expect, it } from "vitest";
import { DataCursor, epochOrder } from "../src/train/data-cursor.js";
import { PendingDraws } from "../src/train/pending-draws.js";

describe("DataCursor", () => {
  it("hands out every prompt once per epoch, in a seeded order that differs between epochs", () => {
    const cursor = new DataCursor(10, 7, true);
    const epoch0 = cursor.next(10);
    const epoch1 = cursor.next(10);
    expect([...epoch0].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect([...epoch1].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(epoch0).not.toEqual(epoch1);
    expect(epoch0).toEqual(epochOrder(10, 7, 0, true));
    expect(cursor.position).toEqual({ epoch: 1, offset: 10 });
  });

  it("resumed from a saved position, continues exactly as the uninterrupted cursor", () => {
    const straight = new DataCursor(7, 1, true);
    const expected = [straight.next(3), straight.next(3), straight.next(3), straight.next(3)];
    const first = new DataCursor(7, 1, true);
    const got = [first.next(3), first.next(3)];
    const resumed = new DataCursor(7, 1, true, first.position);
    got.push(resumed.next(3), resumed.next(3));
    expect(got).toEqual(expected);
  });

  it("restore() gives back the prompts of an unfinished step", () => {
    const cursor = new DataCursor(5, 3, false);
    const before = cursor.position;
    const taken = cursor.next(2);
    cursor.restore(before);
    expect(cursor.next(2)).toEqual(taken);
    expect(taken).toEqual([0, 1]);
  });
});

describe("PendingDraws", () => {
  it("saves the position of the earliest draw not yet trained on, across epochs, else the cursor's", () => {
    const cursor = new DataCursor(5, 1, true);
    const draws = new PendingDraws();
    const first = draws.add(cursor.position);
    cursor.next(4);
    const second = draws.add(cursor.position);
    cursor.next(4); // into epoch 1
    expect(draws.earliest(cursor.position)).toEqual({ epoch: 0, offset: 0 });
    draws.settle(first);
    expect(draws.earliest(cursor.position)).toEqual({ epoch: 0, offset: 4 });
    draws.settle(second);
    expect(draws.earliest(cursor.position)).toEqual({ epoch: 1, offset: 3 });
  });
});
