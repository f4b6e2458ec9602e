/**
 * src/packed-list.ts: mapPacked gives what `map` gives, and its list stays packed once V8 has optimized the code that
 * makes it, where the builtin map's result turns holey (the two array maps that deoptimized its readers). The second
 * is checked in a child Node with V8's natives syntax, on the helper's own source.
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { mapPacked } from "../src/packed-list.js";

describe("mapPacked", () => {
  it("gives each item's value in order, with its index", () => {
    expect(mapPacked(["a", "b", "c"], (item, index) => `${item}${index}`)).toEqual(["a0", "b1", "c2"]);
    expect(mapPacked([], () => 1)).toEqual([]);
  });

  it("makes a packed list from optimized code too", () => {
    const script = `
      const mapPacked = ${mapPacked.toString()};
      function make(items) { return mapPacked(items, (x) => ({ x })); }
      function viaMap(items) { return items.map((x) => ({ x })); }
      for (const f of [make, viaMap]) { %PrepareFunctionForOptimization(f); f([1, 2, 3]); f([4, 5]); %OptimizeFunctionOnNextCall(f); }
      const packed = make([1, 2, 3]);
      const mapped = viaMap([1, 2, 3]);
      console.log(JSON.stringify({ optimized: %ActiveTierIsTurbofan(make), holey: %HasHoleyElements(packed), mapHoley: %HasHoleyElements(mapped) }));
    `;
    const run = spawnSync(process.execPath, ["--allow-natives-syntax", "-e", script], { encoding: "utf8" });
    expect(run.status, run.stderr).toBe(0);
    const seen = JSON.parse(run.stdout) as { optimized: boolean; holey: boolean; mapHoley: boolean };
    expect(seen.optimized).toBe(true);
    expect(seen.holey).toBe(false);
    // What the helper is for: this V8's optimized map allocates its result holey.
    expect(seen.mapHoley).toBe(true);
  });
});
