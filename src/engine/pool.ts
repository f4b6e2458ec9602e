/**
 * Which server gets the next request: least outstanding requests among the healthy servers, except that a
 * trajectory (its sticky key) stays on the server it started on, so the server's radix cache already holds its
 * prefix. A server that fails at the connection level is skipped for a cool-down, and its trajectories move.
 *
 * The loads and cool-downs live in a ServerLoads, which rollout threads (`--threads`) share through a
 * SharedArrayBuffer: every thread's pool then balances on what all threads have in flight, and a server one thread
 * found down is avoided by all, as with one client. Sticky pins stay per pool: a trajectory runs on one thread.
 */
import { LruMap } from "../lru-map.js";
import { ServerLoads } from "./server-loads.js";

export interface ServerPoolOptions {
  /** How long a server that failed at the connection level is avoided. */
  unhealthyCooldownMs: number;
  /** Bound on remembered sticky keys; the least recently used are forgotten first. */
  maxStickyKeys: number;
  /** Shared with the pools of other threads (ServerLoads.shared); private to this pool when absent. */
  loads?: ServerLoads;
  now?: () => number;
}

export class ServerPool {
  private readonly loads: ServerLoads;
  private readonly index = new Map<string, number>();
  private readonly sticky: LruMap<string, string>;
  /** Rotates the tie-break so equal loads spread across servers instead of piling on the first. */
  private nextTieBreak = 0;
  private readonly now: () => number;

  constructor(
    readonly servers: readonly string[],
    private readonly options: ServerPoolOptions,
  ) {
    if (servers.length === 0) throw new Error("ServerPool needs at least one server");
    servers.forEach((server, i) => this.index.set(server, i));
    this.loads = options.loads ?? new ServerLoads(servers.length);
    if (this.loads.servers !== servers.length) throw new Error(`ServerPool: shared loads hold ${this.loads.servers} servers, not ${servers.length}`);
    this.now = options.now ?? Date.now;
    this.sticky = new LruMap(options.maxStickyKeys);
  }

  isHealthy(server: string): boolean {
    return this.loads.unhealthyUntil(this.indexOf(server)) <= this.now();
  }

  private indexOf(server: string): number {
    const i = this.index.get(server);
    if (i === undefined) throw new Error(`ServerPool: ${server} is not one of its servers`);
    return i;
  }

  /**
   * Picks a server for a request. `avoid` is the server the previous attempt failed on: a retry goes elsewhere
   * when another healthy server exists.
   */
  /** The server a request would name without being sent: its pinned one, else the first. Changes nothing. */
  peek(stickyKey?: string): string {
    return (stickyKey !== undefined ? this.sticky.get(stickyKey) : undefined) ?? this.servers[0]!;
  }

  pick(stickyKey?: string, avoid?: string): string {
    if (stickyKey !== undefined) {
      const pinned = this.sticky.get(stickyKey);
      if (pinned !== undefined && pinned !== avoid && this.isHealthy(pinned)) return pinned;
    }
    const healthy = this.servers.filter((s) => this.isHealthy(s));
    const preferred = healthy.filter((s) => s !== avoid);
    const candidates = preferred.length > 0 ? preferred : healthy.length > 0 ? healthy : this.servers;
    const chosen = this.leastOutstanding(candidates);
    if (stickyKey !== undefined) this.sticky.set(stickyKey, chosen);
    return chosen;
  }

  private leastOutstanding(candidates: readonly string[]): string {
    const start = this.nextTieBreak++ % candidates.length;
    let best = candidates[start]!;
    let bestLoad = this.loads.load(this.indexOf(best));
    for (let i = 1; i < candidates.length; i++) {
      const server = candidates[(start + i) % candidates.length]!;
      const load = this.loads.load(this.indexOf(server));
      if (load < bestLoad) {
        best = server;
        bestLoad = load;
      }
    }
    return best;
  }

  /** Drops a finished trajectory's pin. */
  forget(stickyKey: string): void {
    this.sticky.delete(stickyKey);
  }

  acquire(server: string): void {
    this.loads.acquire(this.indexOf(server));
  }

  release(server: string): void {
    this.loads.release(this.indexOf(server));
  }

  markUnhealthy(server: string): void {
    this.loads.setUnhealthyUntil(this.indexOf(server), this.now() + this.options.unhealthyCooldownMs);
  }

  markHealthy(server: string): void {
    this.loads.setUnhealthyUntil(this.indexOf(server), 0);
  }

  /** What every pool sharing these loads has in flight, per server. */
  inFlightByServer(): Record<string, number> {
    return Object.fromEntries(this.servers.map((server, i) => [server, this.loads.load(i)]));
  }
}
