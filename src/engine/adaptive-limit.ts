/**
 * Adaptive concurrency for /generate: how many attempts the client keeps in flight, found from the server's answers
 * (AIMD, as TCP does). Without it a slow server turns a tight timeout into a retry storm: requests queue in the server
 * past the timeout, time out, are retried to the back of the same queue, and time out again, so every hang costs
 * dozens of timeouts and the run makes no progress.
 *
 * - A 429 or 503 halves the limit: the server says it is overloaded.
 * - A timeout halves it too when the server is slow overall (the moving average of answer times, timeouts counted
 *   as the full timeout, is above a quarter of the timeout). When other answers come back fast, a timeout is one
 *   stuck request, and cutting everyone's concurrency would not help.
 * - A success raises it by 1/limit, so it climbs back by about one per round of requests, up to the
 *   configured concurrency.
 * - One decrease per round: signals from attempts sent before the last decrease describe the load that decrease
 *   already answered, so they are ignored (otherwise one burst of timeouts would drive the limit to 1).
 *
 * Attempts wait here, in the client, for a slot; their request timeout starts only once they are sent.
 */
export interface AdaptiveLimitOptions {
  /** The most attempts in flight, and where the limit starts. */
  max: number;
  /** The request timeout the latency signal compares against. @unit milliseconds */
  requestTimeoutMs: number;
  /** Off: the limit stays at `max` (what the client did before). @default true */
  enabled?: boolean;
  now?: () => number;
}

/** What one attempt's answer says about the server's load: `neutral` for answers that say nothing of it (a reset, a
 * 500, the caller's abort). */
export type LoadSignal = "ok" | "timeout" | "overloaded" | "neutral";

export interface Slot {
  /** Reports the attempt's outcome and frees its slot. Call once. */
  release(signal: LoadSignal): void;
}

const DECREASE = 0.5;
/** Timeouts count as overload while the average answer time is above this share of the timeout. */
const LOADED_SHARE = 0.25;
/** Weight of the newest answer time in the moving average. */
const EWMA_WEIGHT = 0.1;

interface Waiter {
  admit(): void;
}

export class AdaptiveLimit {
  private limitValue: number;
  private inFlight = 0;
  /** Sequence number of the next attempt; a decrease remembers it, and older attempts cannot decrease again. */
  private nextSeq = 0;
  private decreasedAtSeq = -1;
  private readonly waiters: Waiter[] = [];
  private readonly now: () => number;
  private decreases = 0;
  private lowest: number;
  private averageLatencyMs: number | undefined;

  constructor(private readonly options: AdaptiveLimitOptions) {
    this.limitValue = options.max;
    this.lowest = options.max;
    this.now = options.now ?? Date.now;
  }

  /** The current limit, rounded down: attempts beyond it wait. */
  get limit(): number {
    return Math.max(1, Math.floor(this.limitValue));
  }

  /** `lowest`: the smallest limit so far; `decreases`: how often it was cut. */
  stats(): { limit: number; lowest: number; decreases: number; waiting: number } {
    return { limit: this.limit, lowest: this.lowest, decreases: this.decreases, waiting: this.waiters.length };
  }

  /** Waits for a slot, first come first served. Resolves null when `signal` aborts first. */
  acquire(signal?: AbortSignal): Promise<Slot | null> {
    if (signal?.aborted) return Promise.resolve(null);
    if (!this.enabled || (this.inFlight < this.limit && this.waiters.length === 0)) return Promise.resolve(this.take());
    return new Promise((resolve) => {
      const onAbort = () => {
        const index = this.waiters.indexOf(waiter);
        if (index >= 0) this.waiters.splice(index, 1);
        resolve(null);
      };
      const waiter: Waiter = {
        admit: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve(this.take());
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  private get enabled(): boolean {
    return this.options.enabled !== false;
  }

  /** Counts an attempt in flight, synchronously, so the count is right before any other caller looks. */
  private take(): Slot {
    this.inFlight++;
    const seq = this.nextSeq++;
    const sentAt = this.now();
    let released = false;
    return {
      release: (load) => {
        if (released) return;
        released = true;
        this.inFlight--;
        this.adjust(load, seq, this.now() - sentAt);
        this.admitWaiters();
      },
    };
  }

  private admitWaiters(): void {
    while (this.waiters.length > 0 && this.inFlight < this.limit) this.waiters.shift()!.admit();
  }

  private adjust(load: LoadSignal, seq: number, elapsedMs: number): void {
    if (!this.enabled || load === "neutral") return;
    const timeoutMs = this.options.requestTimeoutMs;
    if (load === "ok" || load === "timeout") {
      const latency = load === "timeout" ? timeoutMs : elapsedMs;
      this.averageLatencyMs =
        this.averageLatencyMs === undefined ? latency : this.averageLatencyMs + EWMA_WEIGHT * (latency - this.averageLatencyMs);
    }
    if (load === "ok") {
      this.limitValue = Math.min(this.options.max, this.limitValue + 1 / this.limitValue);
      return;
    }
    if (load === "timeout" && this.averageLatencyMs! <= LOADED_SHARE * timeoutMs) return;
    if (seq <= this.decreasedAtSeq) return;
    this.limitValue = Math.max(1, this.limitValue * DECREASE);
    this.lowest = Math.min(this.lowest, this.limit);
    this.decreases++;
    this.decreasedAtSeq = this.nextSeq - 1;
  }
}
