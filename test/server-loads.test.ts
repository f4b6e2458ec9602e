/**
 * ServerLoads: the per-server loads and cool-downs that rollout threads share, so their clients balance as one
 * server pool (engine/pool.ts). Two pools over one ServerLoads see each other's requests and cool-downs; threads
 * updating it at once lose no count.
 */
import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { ServerPool } from "../src/engine/pool.js";
import { ServerLoads } from "../src/engine/server-loads.js";
import { REPO_ROOT } from "./helpers/cli.js";

const LOADS_MODULE = pathToFileURL(path.join(REPO_ROOT, "dist", "engine", "server-loads.js")).href;

const SERVERS = ["http://a", "http://b"];
const options = { unhealthyCooldownMs: 5_000, maxStickyKeys: 100 };

describe("ServerLoads shared by two pools", () => {
  it("each pool balances on the requests both have in flight", () => {
    const loads = ServerLoads.shared(SERVERS.length);
    const one = new ServerPool(SERVERS, { ...options, loads });
    const two = new ServerPool(SERVERS, { ...options, loads: new ServerLoads(SERVERS.length, loads.buffer) });
    const first = one.pick();
    one.acquire(first);
    // The second pool's own tie-break would start at the same server: the shared load sends it to the other.
    const second = two.pick();
    expect(second).not.toBe(first);
    two.acquire(second);
    expect(one.inFlightByServer()).toEqual({ "http://a": 1, "http://b": 1 });
    two.release(second);
    one.release(first);
    expect(two.inFlightByServer()).toEqual({ "http://a": 0, "http://b": 0 });
  });

  it("a server one pool found down is avoided by the other until its cool-down ends", () => {
    let now = 1_000;
    const loads = ServerLoads.shared(SERVERS.length);
    const one = new ServerPool(SERVERS, { ...options, loads, now: () => now });
    const two = new ServerPool(SERVERS, { ...options, loads: new ServerLoads(SERVERS.length, loads.buffer), now: () => now });
    one.markUnhealthy("http://a");
    expect([two.pick(), two.pick(), two.pick()]).toEqual(["http://b", "http://b", "http://b"]);
    now += 5_001;
    expect(two.isHealthy("http://a")).toBe(true);
    one.markUnhealthy("http://b");
    two.markHealthy("http://b");
    expect(one.isHealthy("http://b")).toBe(true);
  });

  it("never goes below zero, so a stray release cannot make a busy server look idle", () => {
    const loads = new ServerLoads(1);
    loads.release(0);
    loads.acquire(0);
    expect(loads.load(0)).toBe(1);
  });

  it("refuses loads of another server count", () => {
    expect(() => new ServerPool(SERVERS, { ...options, loads: new ServerLoads(3) })).toThrow(/3 servers, not 2/);
  });
});

describe("ServerLoads across worker threads", () => {
  it("loses no increment or decrement when two threads update it at once", async () => {
    const loads = ServerLoads.shared(2);
    const PER_THREAD = 1_000_000;
    const run = async (phase: "acquire" | "release") => {
      // Both threads wait at a barrier, then update at once (one after the other would prove nothing).
      const barrier = new Int32Array(new SharedArrayBuffer(4));
      const workers = [0, 1].map(() => {
        // The built module (what rollout threads load), over the buffer the main thread shares.
        const worker = new Worker(
          `const { workerData } = require("node:worker_threads");
           import(workerData.module).then(({ ServerLoads }) => {
             const loads = new ServerLoads(2, workerData.buffer);
             Atomics.add(workerData.barrier, 0, 1);
             while (Atomics.load(workerData.barrier, 0) < 2) {}
             for (let i = 0; i < workerData.times; i++) loads[workerData.phase](1);
           });`,
          { eval: true, workerData: { module: LOADS_MODULE, buffer: loads.buffer, barrier, times: PER_THREAD, phase } },
        );
        return new Promise<void>((resolve, reject) => {
          worker.once("error", reject);
          worker.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`exit ${code}`))));
        });
      });
      await Promise.all(workers);
    };
    await run("acquire");
    expect(loads.load(1)).toBe(2 * PER_THREAD);
    expect(loads.load(0)).toBe(0);
    await run("release");
    expect(loads.load(1)).toBe(0);
  });
});
