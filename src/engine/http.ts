/**
 * One HTTP attempt on undici, classified. It never throws for network trouble: the caller decides on retries
 * from the outcome; whether response bytes had arrived (a cut body, `partial_body`) is recorded here.
 */
import type { IncomingHttpHeaders } from "node:http";
import { request, type Dispatcher } from "undici";
import type { FailureKind } from "./types.js";

export interface AttemptRequest {
  dispatcher: Dispatcher;
  url: string;
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: string;
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

export async function sendAttempt(req: AttemptRequest): Promise<AttemptOutcome> {
  if (req.signal?.aborted) return { kind: "cancelled" };
  // Our own controller joins the caller's signal and the attempt timeout. A listener removed in `finally`
  // avoids AbortSignal.any, whose dependants on a long-lived trajectory signal leak on Node 20.
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Error(`no complete response within ${req.timeoutMs} ms`));
  }, req.timeoutMs);
  const onCallerAbort = () => controller.abort(req.signal?.reason);
  req.signal?.addEventListener("abort", onCallerAbort, { once: true });
  let responseStarted = false;
  try {
    const response = await request(req.url, {
      dispatcher: req.dispatcher,
      method: req.method,
      headers: req.headers,
      body: req.body ?? null,
      signal: controller.signal,
      // Our timer covers the whole attempt; undici's own per-phase timeouts only need to not fire first.
      headersTimeout: req.timeoutMs + 1000,
      bodyTimeout: req.timeoutMs + 1000,
    });
    responseStarted = true;
    const bodyText = await response.body.text();
    return { kind: "response", status: response.statusCode, headers: response.headers, bodyText };
  } catch (err) {
    if (req.signal?.aborted) return { kind: "cancelled" };
    const error = asError(err);
    if (responseStarted) return { kind: "failed", failure: "partial_body", error, responseStarted };
    if (timedOut) return { kind: "failed", failure: "timeout", error, responseStarted };
    const code = errorCode(err);
    if (code === "UND_ERR_HEADERS_TIMEOUT") return { kind: "failed", failure: "timeout", error, responseStarted };
    const failure: FailureKind = code !== undefined && CONNECT_CODES.has(code) ? "connect" : "reset";
    return { kind: "failed", failure, error, responseStarted };
  } finally {
    clearTimeout(timer);
    req.signal?.removeEventListener("abort", onCallerAbort);
  }
}
