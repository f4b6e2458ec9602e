/**
 * One HTTP attempt on undici, classified. It never throws for network trouble: the caller decides on retries
 * from the outcome; whether response bytes had arrived (a cut body, `partial_body`) is recorded here.
 */
import type { IncomingHttpHeaders } from "node:http";
import type { Dispatcher } from "undici";
import { handOverTogether } from "./hand-over.js";
import type { FailureKind } from "./types.js";

export interface AttemptRequest {
  dispatcher: Dispatcher;
  url: string;
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: string | Uint8Array;
  /** Whole attempt, headers and body together. */
  timeoutMs: number;
  /** The caller's cancel signal. */
  signal?: AbortSignal;
}

export type AttemptOutcome =
  | { kind: "response"; status: number; headers: IncomingHttpHeaders; bodyText: string }
  | { kind: "failed"; failure: FailureKind; error: Error; responseStarted: boolean }
  | { kind: "cancelled" };

/** Error codes meaning the request never reached the server, so a retry cannot run it twice. */
const CONNECT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

function errorCode(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  if (typeof code === "string") return code;
  // undici wraps socket errors; the OS code is on the cause.
  return errorCode((err as { cause?: unknown }).cause);
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

/**
 * Sent with undici's `dispatch` and a handler that only gathers the body: `request()` wraps every response in a
 * Readable stream and its own abort plumbing, which cost 38 against 22 µs of CPU per request at 64 in flight and 69
 * against 46 at 1 (a /generate answer of 40 tokens on loopback). Only the first settlement counts: a caller's abort
 * or the timeout resolves at once, and the request is then aborted in undici (when it starts, if it is still queued).
 */
export function sendAttempt(req: AttemptRequest): Promise<AttemptOutcome> {
  if (req.signal?.aborted) return Promise.resolve({ kind: "cancelled" });
  return new Promise<AttemptOutcome>((resolve) => new Attempt(req, resolve).send());
}

/** One attempt in flight: undici's handler for it, its timer and its caller's abort, settled once. */
class Attempt implements Dispatcher.DispatchHandler {
  private settled = false;
  private responseStarted = false;
  private status = 0;
  private headers: IncomingHttpHeaders = {};
  private readonly chunks: Buffer[] = [];
  private controller: { abort(reason: Error): void } | undefined;
  private abortReason: Error | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly req: AttemptRequest,
    private readonly resolve: (outcome: AttemptOutcome) => void,
  ) {
    this.timer = setTimeout(() => {
      const error = new Error(`no complete response within ${req.timeoutMs} ms`);
      this.fail(this.responseStarted ? "partial_body" : "timeout", error);
      this.stop(error);
    }, req.timeoutMs);
    // A listener removed on settlement, not AbortSignal.any: its dependants on a long-lived trajectory signal leak on
    // Node 20.
    req.signal?.addEventListener("abort", this.onCallerAbort, { once: true });
  }

  send(): void {
    const url = new URL(this.req.url);
    try {
      this.req.dispatcher.dispatch(
        {
          origin: url.origin,
          path: `${url.pathname}${url.search}`,
          method: this.req.method,
          headers: this.req.headers,
          body: this.req.body ?? null,
          // Our timer covers the whole attempt; undici's own per-phase timeouts only need to not fire first.
          headersTimeout: this.req.timeoutMs + 1000,
          bodyTimeout: this.req.timeoutMs + 1000,
        },
        this,
      );
    } catch (err) {
      // A dispatcher that is closed or destroyed refuses at once.
      this.fail("reset", asError(err));
    }
  }

  onRequestStart(controller: { abort(reason: Error): void }): void {
    this.controller = controller;
    if (this.abortReason) controller.abort(this.abortReason);
  }

  onResponseStart(_controller: unknown, statusCode: number, headers: Record<string, string | string[]>): void {
    // 1xx informational answers come before the real one.
    if (statusCode < 200) return;
    this.responseStarted = true;
    this.status = statusCode;
    this.headers = headers as IncomingHttpHeaders;
  }

  onResponseData(_controller: unknown, chunk: Buffer): void {
    this.chunks.push(chunk);
  }

  onResponseEnd(): void {
    const chunks = this.chunks;
    const bodyText = chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8");
    this.settle({ kind: "response", status: this.status, headers: this.headers, bodyText });
  }

  onResponseError(_controller: unknown, err: Error): void {
    if (this.req.signal?.aborted) return this.settle({ kind: "cancelled" });
    if (this.responseStarted) return this.fail("partial_body", asError(err));
    const code = errorCode(err);
    if (code === "UND_ERR_HEADERS_TIMEOUT") return this.fail("timeout", asError(err));
    this.fail(code !== undefined && CONNECT_CODES.has(code) ? "connect" : "reset", asError(err));
  }

  private readonly onCallerAbort = (): void => {
    this.settle({ kind: "cancelled" });
    this.stop(asError(this.req.signal?.reason ?? new Error("cancelled")));
  };

  private fail(failure: FailureKind, error: Error): void {
    this.settle({ kind: "failed", failure, error, responseStarted: this.responseStarted });
  }

  private settle(outcome: AttemptOutcome): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.req.signal?.removeEventListener("abort", this.onCallerAbort);
    handOverTogether(this.handOver, outcome);
  }

  /**
   * The outcome as its caller gets it, in the check phase (hand-over.ts): a caller that aborted while its answer waited
   * to be handed over gets `cancelled`, as it would have had the answer come after the abort, so an abort holds from
   * the moment it is made. (A trajectory past its last answer can still finish after an over-sampling abort: the
   * rollout's record step over-samples it, run-rollout.ts.)
   */
  private readonly handOver = (outcome: AttemptOutcome): void => {
    this.resolve(outcome.kind !== "cancelled" && this.req.signal?.aborted ? { kind: "cancelled" } : outcome);
  };

  /** Aborts the request in undici now, or as it starts if it is still queued for a connection. */
  private stop(reason: Error): void {
    this.abortReason ??= reason;
    this.controller?.abort(reason);
  }
}
