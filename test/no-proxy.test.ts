import { describe, expect, it } from "vitest";
import { loopbackNoProxy } from "../src/process/index.js";

describe("loopbackNoProxy", () => {
  it("adds the loopback addresses to the hosts either spelling lists, in both spellings, once each", () => {
    expect(loopbackNoProxy({})).toEqual({ NO_PROXY: "127.0.0.1,localhost,::1", no_proxy: "127.0.0.1,localhost,::1" });
    const merged = loopbackNoProxy({ no_proxy: "internal.example, .corp", NO_PROXY: "localhost,.corp" });
    expect(merged).toEqual({ NO_PROXY: "internal.example,.corp,localhost,127.0.0.1,::1", no_proxy: "internal.example,.corp,localhost,127.0.0.1,::1" });
  });

  it("keeps a wildcard the user set", () => {
    expect(loopbackNoProxy({ NO_PROXY: "*" }).no_proxy).toBe("*,127.0.0.1,localhost,::1");
  });
});
