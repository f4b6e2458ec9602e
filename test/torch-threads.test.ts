import { describe, expect, it } from "vitest";
import { MALLOC_SETTINGS, torchProcessEnv, torchThreadEnv } from "../src/torch-threads.js";

describe("torchThreadEnv", () => {
  it("gives torch's CPU pools one thread unless the user chose", () => {
    expect(torchThreadEnv({})).toEqual({ OMP_NUM_THREADS: "1", MKL_NUM_THREADS: "1" });
    expect(torchThreadEnv({ OMP_NUM_THREADS: "8" })).toEqual({ MKL_NUM_THREADS: "1" });
    expect(torchThreadEnv({ OMP_NUM_THREADS: "8", MKL_NUM_THREADS: "4" })).toEqual({});
  });
});

describe("torchProcessEnv", () => {
  it("adds malloc's settings, unless the user set any of them", () => {
    expect(torchProcessEnv({})).toEqual({
      OMP_NUM_THREADS: "1",
      MKL_NUM_THREADS: "1",
      MALLOC_MMAP_THRESHOLD_: "33554432",
      MALLOC_TRIM_THRESHOLD_: "4294967296",
      MALLOC_TOP_PAD_: "268435456",
    });
    expect(torchProcessEnv({ OMP_NUM_THREADS: "4", MALLOC_TRIM_THRESHOLD_: "0" })).toEqual({ MKL_NUM_THREADS: "1" });
    expect(Object.keys(MALLOC_SETTINGS)).toHaveLength(3);
  });
});
