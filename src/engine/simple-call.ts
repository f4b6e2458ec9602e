/**
 * Single requests without retries, for health checks, server info and admin calls: one attempt, and any
 * failure becomes an EngineConnectionError or EngineServerError naming the server and path.
 */
import type { Dispatcher } from "undici";
import type { z } from "zod";
import { EngineConnectionError, EngineServerError } from "./errors.js";
import { formatIssues } from "../zod-issues.js";
import { sendAttempt } from "./http.js";
import type { FailureKind } from "./types.js";
import { errorMessageOf, excerpt } from "./wire.js";

export interface CallContext {
  dispatcher: Dispatcher;
  /** Request headers (auth included) for a call with or without a JSON body. */
  headers(json: boolean): Record<string, string>;
  /** Timeout when a call names none. */
  timeoutMs: number;
}

type Method = "GET" | "POST";

function kindOf(status: number): FailureKind {
  return status === 429 ? "http_429" : status >= 500 ? "http_5xx" : "http_4xx";
}

/** One request; throws only when no HTTP answer came back. */
export async function callRaw(
  ctx: CallContext,
  server: string,
  method: Method,
  path: string,
  body: unknown,
  timeoutMs: number = ctx.timeoutMs,
): Promise<{ status: number; bodyText: string }> {
  const outcome = await sendAttempt({
    dispatcher: ctx.dispatcher,
    url: `${server}${path}`,
    method,
    headers: ctx.headers(body !== undefined),
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    timeoutMs,
  });
  if (outcome.kind === "cancelled") throw new EngineConnectionError(`${server}${path} was cancelled`, "reset", server, 1);
  if (outcome.kind === "failed") {
    throw new EngineConnectionError(`${outcome.failure} on ${server}${path}: ${outcome.error.message}`, outcome.failure, server, 1, {
      cause: outcome.error,
      hint: `check that the SGLang server at ${server} is up`,
    });
  }
  return { status: outcome.status, bodyText: outcome.bodyText };
}

function statusError(server: string, path: string, status: number, bodyText: string): EngineServerError {
  return new EngineServerError(
    `${server}${path} answered HTTP ${status}: ${errorMessageOf(bodyText)}`,
    status,
    excerpt(bodyText),
    kindOf(status),
    server,
    1,
    status === 401 ? { hint: "the server wants an API key: pass --api-key (or check the one given)" } : {},
  );
}

/** A call whose success body does not matter (empty, `null`, or a status message): returns the text of a 2xx. */
export async function callText(
  ctx: CallContext,
  server: string,
  method: Method,
  path: string,
  body: unknown,
  timeoutMs: number = ctx.timeoutMs,
): Promise<string> {
  const { status, bodyText } = await callRaw(ctx, server, method, path, body, timeoutMs);
  if (status < 200 || status >= 300) throw statusError(server, path, status, bodyText);
  return bodyText;
}

/** A call whose JSON answer is validated by `schema`; `acceptStatus` admits documented non-2xx bodies. */
export async function callJson<S extends z.ZodType>(
  ctx: CallContext,
  server: string,
  method: Method,
  path: string,
  body: unknown,
  schema: S,
  timeoutMs: number = ctx.timeoutMs,
  acceptStatus: (status: number) => boolean = (s) => s >= 200 && s < 300,
): Promise<z.infer<S>> {
  const { status, bodyText } = await callRaw(ctx, server, method, path, body, timeoutMs);
  if (!acceptStatus(status)) throw statusError(server, path, status, bodyText);
  let json: unknown;
  try {
    json = JSON.parse(bodyText);
  } catch (err) {
    throw new EngineServerError(`${server}${path} sent a body that is not JSON`, status, excerpt(bodyText), "bad_response", server, 1, {
      cause: err,
    });
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    throw new EngineServerError(
      `${server}${path} sent an unexpected shape at ${formatIssues(parsed.error, { only: "first" })}`,
      status,
      excerpt(bodyText),
      "bad_response",
      server,
      1,
    );
  }
  return parsed.data;
}
