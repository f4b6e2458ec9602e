/**
 * Retry timing: exponential backoff with jitter, and the server's Retry-After when it sends one. Kept apart from
 * the client so the arithmetic is testable without a server.
 */
import type { IncomingHttpHeaders } from "node:http";

export interface BackoffOptions {
  /** Delay before the first retry, before jitter. */
  baseDelayMs: number;
  /** Cap on any single delay, before jitter. */
  maxDelayMs: number;
  /** Source of randomness in [0, 1); injectable so tests are deterministic. */
  random: () => number;
}

/** `base * 2^retryIndex`, capped, minus up to 25 % jitter so retrying clients do not move in lockstep. */
export function backoffDelayMs(retryIndex: number, options: BackoffOptions): number {
  const raw = Math.min(options.baseDelayMs * 2 ** retryIndex, options.maxDelayMs);
  return raw * (1 - options.random() * 0.25);
}

/** A Retry-After larger than this is ignored in favour of our own backoff: a trajectory cannot wait that long. */
const MAX_RETRY_AFTER_MS = 60_000;

/**
 * Reads `retry-after-ms` (non-standard, sent by some proxies) or `retry-after` (seconds or an HTTP date).
 * Returns undefined when absent, unparsable, negative or above a minute.
 */
export function retryAfterMs(headers: IncomingHttpHeaders, now: number = Date.now()): number | undefined {
  const first = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);
  const msHeader = first(headers["retry-after-ms"]);
  let ms: number | undefined;
  if (msHeader !== undefined && msHeader.trim() !== "" && Number.isFinite(Number(msHeader))) {
    ms = Number(msHeader);
  } else {
    const header = first(headers["retry-after"]);
    if (header !== undefined && header.trim() !== "") {
      if (Number.isFinite(Number(header))) ms = Number(header) * 1000;
      else {
        const date = Date.parse(header);
        if (!Number.isNaN(date)) ms = date - now;
      }
    }
  }
  if (ms === undefined || ms < 0 || ms > MAX_RETRY_AFTER_MS) return undefined;
  return ms;
}

/** Waits `ms`, or less if `signal` aborts first. Resolves true when the full delay elapsed. */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
