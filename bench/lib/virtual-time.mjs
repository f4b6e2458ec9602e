/**
 * Virtual time for promise-based code: `sleep` parks a promise on a timer heap, and `drive` runs the code under test
 * until it settles, jumping the clock to the next timer whenever nothing else can run. Code that only awaits promises
 * (src/train/schedule does) then runs exactly as it would over hours of real time, in milliseconds, deterministically.
 */
import { TimerHeap } from "./serving-sim.mjs";

const settleMicrotasks = () => new Promise((resolve) => setImmediate(resolve));

export class VirtualTime {
  now = 0;
  timers = new TimerHeap();

  /** Resolves after `ms` of virtual time, or as soon as `signal` aborts. */
  sleep(ms, signal) {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        signal?.removeEventListener("abort", finish);
        resolve();
      };
      signal?.addEventListener("abort", finish, { once: true });
      this.timers.push(this.now + ms, finish);
    });
  }

  /** Runs until `promise` settles; returns its value. */
  async drive(promise) {
    let state = { done: false };
    promise.then(
      (value) => (state = { done: true, value }),
      (error) => (state = { done: true, error }),
    );
    for (;;) {
      await settleMicrotasks();
      if (state.done) break;
      if (this.timers.size === 0) throw new Error("virtual time: the code waits on something no timer will resolve");
      const timer = this.timers.pop();
      this.now = Math.max(this.now, timer.time);
      timer.fn();
    }
    if ("error" in state) throw state.error;
    return state.value;
  }
}
