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
    const draws = new PendingDraws(cursor);
    const first = draws.add();
    cursor.next(4);
    const second = draws.add();
    cursor.next(4); // into epoch 1
    expect(draws.checkpoint()).toEqual({ epoch: 0, offset: 0 });
    draws.settle(first);
    expect(draws.checkpoint()).toEqual({ epoch: 0, offset: 4 });
    draws.settle(second);
    expect(draws.checkpoint()).toEqual({ epoch: 1, offset: 3 });
  });

  it("with groups trained out of order, a resumed cursor draws exactly the untrained ones, then goes on as before", () => {
    const straight = new DataCursor(5, 2, true).next(8);
    const cursor = new DataCursor(5, 2, true);
    const draws = new PendingDraws(cursor);
    const tickets = Array.from({ length: 6 }, () => {
      const ticket = draws.add();
      cursor.next(1);
      return ticket;
    });
    for (const t of [1, 3, 4]) draws.settle(tickets[t]!); // groups 0, 2 and 5 still generating
    const saved = draws.checkpoint();
    expect(saved).toEqual({ epoch: 0, offset: 0, skip: [1, 3, 4] });

    const resumed = new DataCursor(5, 2, true, JSON.parse(JSON.stringify(saved)) as typeof saved);
    const again = new PendingDraws(resumed);
    const redo = [again.add(), resumed.next(1)[0], again.add(), resumed.next(1)[0], again.add(), resumed.next(1)[0]];
    expect([redo[1], redo[3], redo[5]]).toEqual([straight[0], straight[2], straight[5]]);
    expect(resumed.next(2)).toEqual(straight.slice(6, 8));
    // A second checkpoint with the first redone group still open keeps the places already trained before.
    again.settle(redo[2] as number);
    expect(again.checkpoint()).toEqual({ epoch: 0, offset: 0, skip: [1, 2, 3, 4] });
  });
});
