/** Final failures of an engine request, as subclasses of the project's ConnectionError / ServerError. */
import { ConnectionError, ServerError } from "../errors.js";
import type { FailureKind } from "./types.js";

/** Nothing usable came back: refused, reset, timed out, or the body broke off. */
export class EngineConnectionError extends ConnectionError {
  constructor(
    message: string,
    readonly kind: FailureKind,
    readonly server: string,
    readonly attempts: number,
    options: { hint?: string; cause?: unknown } = {},
  ) {
    super(message, options);
  }
}

/** The server answered with an error status, or with a 2xx body that breaks the protocol (`kind: "bad_response"`). */
export class EngineServerError extends ServerError {
  constructor(
    message: string,
    status: number,
    bodyExcerpt: string,
    readonly kind: FailureKind,
    readonly server: string,
    readonly attempts: number,
    options: { hint?: string; cause?: unknown } = {},
  ) {
    super(message, status, bodyExcerpt, options);
  }
}

export type EngineError = EngineConnectionError | EngineServerError;

export function isEngineError(err: unknown): err is EngineError {
  return err instanceof EngineConnectionError || err instanceof EngineServerError;
}
