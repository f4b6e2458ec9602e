/**
 * Busy time of one side of the pipeline (the generator, the trainer), for its idle ratio. Nested begin/end pairs
 * count once: the generator is busy while at least one of its groups is in flight.
 */
export type Clock = () => number;

export class ActivityMeter {
  private active = 0;
  private since = 0;
  private total = 0;

  constructor(private readonly clock: Clock) {}

  begin(): void {
    if (this.active++ === 0) this.since = this.clock();
  }

  end(): void {
    if (this.active <= 0) throw new Error("internal: ActivityMeter.end without begin");
    if (--this.active === 0) this.total += this.clock() - this.since;
  }

  /** Busy milliseconds so far, the running interval included. */
  busy(): number {
    return this.total + (this.active > 0 ? this.clock() - this.since : 0);
  }
}

/** Idle ratio of each meter over the time since the last call (the step's wall time). */
export class IdleWindow {
  private start: number;
  private marks: number[];

  constructor(
    private readonly clock: Clock,
    private readonly meters: readonly ActivityMeter[],
  ) {
    this.start = clock();
    this.marks = meters.map((m) => m.busy());
  }

  next(): number[] {
    const now = this.clock();
    const wall = now - this.start;
    const busy = this.meters.map((m, i) => m.busy() - this.marks[i]!);
    this.start = now;
    this.marks = this.meters.map((m) => m.busy());
    return busy.map((b) => (wall > 0 ? Math.min(1, Math.max(0, 1 - b / wall)) : 0));
  }
}
