/**
 * The engine's busy time as the client sees it: the wall time during which at least one /generate attempt of this
 * client was outstanding at a server (sent, its answer not yet read). Two requests of 100 ms that overlap count
 * 100 ms, not 200. It costs a counter per attempt and a clock read on the 0 → 1 and 1 → 0 edges only, so it runs on
 * every request. `agentrl train` reads it around a step's generation (timing_s/gen_engine_busy, the rest of the
 * generation wall time being the client's: tools, agent code, bookkeeping while nothing is at the engine).
 */
export class BusyTime {
  private outstanding = 0;
  private since = 0;
  private total = 0;

  /** `clock`: milliseconds (performance.now unless a test brings its own). */
  constructor(private readonly clock: () => number = () => performance.now()) {}

  /** An attempt was sent. */
  begin(): void {
    if (this.outstanding++ === 0) this.since = this.clock();
  }

  /** An attempt's answer came back (or it failed, or was cancelled). */
  end(): void {
    if (this.outstanding === 0) return;
    if (--this.outstanding === 0) this.total += this.clock() - this.since;
  }

  /** Seconds busy since the client started, the stretch still open included. */
  seconds(): number {
    const open = this.outstanding > 0 ? this.clock() - this.since : 0;
    return (this.total + open) / 1000;
  }
}
