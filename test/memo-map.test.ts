/** MemoMap backs the chat caches: a bounded memo that starts over when full, never growing past its bound. */
import { describe, expect, it } from "vitest";
import { MemoMap } from "../src/memo-map.js";

describe("MemoMap", () => {
  it("keeps what it is given until full, then starts over with the new entry", () => {
    const memo = new MemoMap<string, number>(2);
    memo.set("a", 1);
    memo.set("b", 2);
    expect([memo.get("a"), memo.get("b"), memo.size]).toEqual([1, 2, 2]);
    memo.set("c", 3);
    expect([memo.get("a"), memo.get("b"), memo.get("c"), memo.size]).toEqual([undefined, undefined, 3, 1]);
  });

  it("updating a key it holds does not start over", () => {
    const memo = new MemoMap<string, number>(2);
    memo.set("a", 1);
    memo.set("b", 2);
    memo.set("a", 10);
    expect([memo.get("a"), memo.get("b"), memo.size]).toEqual([10, 2, 2]);
  });
});
