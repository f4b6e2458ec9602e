/**
 * The per-server state a server pool balances on (engine/pool.ts), in memory that rollout threads can share: requests
 * in flight and the end of each server's cool-down, by server index.
 */
/** Updated with Atomics, so threads never lose an increment. */
export class ServerLoads {
  private readonly until: BigInt64Array;
  private readonly inFlight: Int32Array;

  /** `buffer` from another ServerLoads of the same server count shares its state; without one it is private. */
  constructor(
    readonly servers: number,
    readonly buffer: SharedArrayBuffer | ArrayBuffer = new ArrayBuffer(ServerLoads.bytes(servers)),
  ) {
    if (buffer.byteLength !== ServerLoads.bytes(servers)) {
      throw new Error(`ServerLoads: a buffer of ${buffer.byteLength} bytes does not hold ${servers} servers`);
    }
    this.until = new BigInt64Array(buffer, 0, servers);
    this.inFlight = new Int32Array(buffer, 8 * servers, servers);
  }

  /** State to hand to other threads (workerData shares it, it is not copied). */
  static shared(servers: number): ServerLoads {
    return new ServerLoads(servers, new SharedArrayBuffer(ServerLoads.bytes(servers)));
  }

  private static bytes(servers: number): number {
    return 12 * servers;
  }

  load(server: number): number {
    return Atomics.load(this.inFlight, server);
  }

  acquire(server: number): void {
    Atomics.add(this.inFlight, server, 1);
  }

  release(server: number): void {
    // Never below 0: a release without its acquire is a bug elsewhere, and must not make a server look idle.
    if (Atomics.sub(this.inFlight, server, 1) <= 0) Atomics.add(this.inFlight, server, 1);
  }

  unhealthyUntil(server: number): number {
    return Number(Atomics.load(this.until, server));
  }

  setUnhealthyUntil(server: number, ms: number): void {
    Atomics.store(this.until, server, BigInt(Math.round(ms)));
  }

  /** What JSON.stringify shows (a client or pool logged whole): the typed arrays hold BigInts, which it refuses. */
  toJSON(): { inFlight: number[]; unhealthyUntil: number[] } {
    const each = <T>(f: (i: number) => T) => Array.from({ length: this.servers }, (_, i) => f(i));
    return { inFlight: each((i) => this.load(i)), unhealthyUntil: each((i) => this.unhealthyUntil(i)) };
  }
}
