import { describe, expect, it } from "vitest";
import { torchThreadEnv } from "../src/torch-threads.js";

describe("torchThreadEnv", () => {
  it("gives torch's CPU pools one thread unless the user chose", () => {
    expect(torchThreadEnv({})).toEqual({ OMP_NUM_THREADS: "1", MKL_NUM_THREADS: "1" });
    expect(torchThreadEnv({ OMP_NUM_THREADS: "8" })).toEqual({ MKL_NUM_THREADS: "1" });
    expect(torchThreadEnv({ OMP_NUM_THREADS: "8", MKL_NUM_THREADS: "4" })).toEqual({});
  });
});
