/**
 * Fault injection for the fake server: a queue of faults for the next requests, and/or a seeded random rate.
 * Deterministic for a given seed and request order.
 */

export type Fault =
  /** Answer normally after this delay. */
  | { type: "latency"; ms: number }
  /** Answer with this HTTP status; `retryAfter` (seconds) sets the Retry-After header. */
  | { type: "status"; status: number; body?: unknown; retryAfter?: number }
  /** Destroy the socket without answering. */
  | { type: "reset" }
  /** Never answer (until the client gives up or the server stops). */
  | { type: "hang" }
  /** Send the normal answer in `chunkBytes` pieces every `intervalMs`; with `cutAfterBytes`, drop the connection after that many bytes. */
  | { type: "drip"; intervalMs: number; chunkBytes?: number; cutAfterBytes?: number }
  /** Answer HTTP 200 with `finish_reason.type == "abort"` and half the tokens, as SGLang does for a scheduler abort. */
  | { type: "abort"; message?: string }
  /** Answer HTTP 200 with JSON that is not a /generate response. */
  | { type: "wrong-shape" }
  /** Answer HTTP 200 with a complete body that is not valid JSON (a garbled or truncated document). */
  | { type: "malformed-json" };

export interface FaultRequest {
  path: string;
  /** The parsed JSON body (undefined when empty or not JSON). */
  body: unknown;
  /** 0-based index of this request among those on `path` since the plan was set. */
  index: number;
}

export interface FaultPlan {
  /** Decides per request, before queue and random (e.g. fault only one prompt); return null for no fault. */
  decide?: (request: FaultRequest) => Fault | null;
  /** Faults for the next matching requests, in order; `null` lets one request through untouched. */
  queue?: Array<Fault | null>;
  /** After the queue is empty: each matching request gets a fault with probability `rate`, picked uniformly from `faults`. */
  random?: { seed: number; rate: number; faults: Fault[] };
  /** Paths the plan applies to. @default ["/generate"] */
  paths?: string[];
}

/** mulberry32: small, seedable, good enough to spread faults. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class FaultInjector {
  private queue: Array<Fault | null> = [];
  private random: (() => number) | undefined;
  private plan: FaultPlan = {};
  private seen = new Map<string, number>();

  constructor(plan: FaultPlan = {}) {
    this.set(plan);
  }

  set(plan: FaultPlan): void {
    this.plan = plan;
    this.seen = new Map();
    this.queue = [...(plan.queue ?? [])];
    this.random = plan.random ? seededRandom(plan.random.seed) : undefined;
  }

  /** The fault for the next request on `path`, or null for a normal answer. */
  next(path: string, body?: unknown): Fault | null {
    const paths = this.plan.paths ?? ["/generate"];
    if (!paths.includes(path)) return null;
    const index = this.seen.get(path) ?? 0;
    this.seen.set(path, index + 1);
    if (this.plan.decide) {
      const decided = this.plan.decide({ path, body, index });
      if (decided) return decided;
    }
    if (this.queue.length > 0) return this.queue.shift() ?? null;
    const random = this.plan.random;
    if (random && this.random && random.faults.length > 0 && this.random() < random.rate) {
      return random.faults[Math.floor(this.random() * random.faults.length)] ?? null;
    }
    return null;
  }
}
