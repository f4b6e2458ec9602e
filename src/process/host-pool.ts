/**
 * Several restarting hosts that share one kind of work (a Python agent loop's trajectories, a function agent's): all
 * started at load, each restarted when it dies, and each piece of work given to the host with the fewest running, so a
 * long trajectory does not hold up the ones queued behind it on the same host.
 */
import type { PythonHostProcess } from "./python-host-process.js";
import { RestartingHost } from "./restarting-host.js";

export class HostPool<H extends PythonHostProcess> {
  private readonly slots: Array<{ host: RestartingHost<H>; running: number }>;

  /** `labelOf(i)` names host i in messages; `start` starts one host, which calls `onDead` once it has died. */
  constructor(count: number, labelOf: (index: number) => string, start: (onDead: () => void) => Promise<H>) {
    this.slots = Array.from({ length: count }, (_, index) => ({ host: new RestartingHost(labelOf(index), start), running: 0 }));
  }

  /** Starts every host; rejects with the first reason one cannot start, the others closed. */
  async load(): Promise<void> {
    const started = await Promise.allSettled(this.slots.map(({ host }) => host.get()));
    const failed = started.find((result) => result.status === "rejected");
    if (failed) {
      await this.close();
      throw failed.reason;
    }
  }

  /**
   * `work` on the host with the fewest running. When that host died and cannot start again, `unavailable` answers
   * with why; without it, the run rejects with that reason.
   */
  async run<T>(work: (host: H) => Promise<T>, unavailable?: (reason: Error) => T): Promise<T> {
    const slot = this.slots.reduce((least, candidate) => (candidate.running < least.running ? candidate : least));
    slot.running += 1;
    try {
      let host: H;
      try {
        host = await slot.host.get();
      } catch (err) {
        if (!unavailable) throw err;
        return unavailable(err as Error);
      }
      return await work(host);
    } finally {
      slot.running -= 1;
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.slots.map(({ host }) => host.close()));
  }
}
