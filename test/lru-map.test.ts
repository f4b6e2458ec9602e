/** LruMap backs the engine pool's sticky pins: it forgets the least recently used entry first. */
import { describe, expect, it } from "vitest";
import { LruMap } from "../src/lru-map.js";

describe("LruMap", () => {
  it("forgets the least recently used entry; get and set both count as use", () => {
    const map = new LruMap<string, number>(2);
    map.set("a", 1);
    map.set("b", 2);
    expect(map.get("a")).toBe(1); // a is now newer than b
    map.set("c", 3);
    expect(map.get("b")).toBeUndefined();
    map.set("a", 10); // updating a refreshes it: c is now the oldest
    map.set("d", 4);
    expect(map.get("c")).toBeUndefined();
    expect(map.get("a")).toBe(10);
    expect(map.get("d")).toBe(4);
  });

  it("delete removes an entry", () => {
    const map = new LruMap<string, number>(2);
    map.set("a", 1);
    map.delete("a");
    expect(map.get("a")).toBeUndefined();
  });
});
