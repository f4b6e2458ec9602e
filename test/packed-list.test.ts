/**
 * src/packed-list.ts: mapPacked gives what `map` gives, and its list stays packed once V8 has optimized the code that
 * makes it, where the builtin map's result turns holey (the two array maps that deoptimized its readers). The second
 * is checked in a child Node with V8's natives syntax, on the helper's own source; V8's own behaviour is not asserted.
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
      // Warmed with feedback first, so that the optimizing compiler inlines mapPacked into its caller, as on a hot path.
      %PrepareFunctionForOptimization(make);
      %PrepareFunctionForOptimization(mapPacked);
      for (let i = 0; i < 20; i++) make([1, 2, 3]);
      %OptimizeFunctionOnNextCall(make);
      const list = make([1, 2, 3]);
      console.log(JSON.stringify({ optimized: %ActiveTierIsTurbofan(make), holey: %HasHoleyElements(list) }));
    `;
    const run = spawnSync(process.execPath, ["--allow-natives-syntax", "-e", script], { encoding: "utf8" });
    expect(run.status, run.stderr).toBe(0);
    const seen = JSON.parse(run.stdout) as { optimized: boolean; holey: boolean };
    // `items.map((x) => ({ x }))` in place of mapPacked gives holey: true here on Node 20's V8.
    expect(seen.optimized).toBe(true);
    expect(seen.holey).toBe(false);
  });
});
