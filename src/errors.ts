import { describeFsError, isFsError } from "./os-error.js";

/**
 * One small error hierarchy. Only bin/agentrl.js exits the process; src/cli/index.ts maps these to exit codes:
 * 2 for usage and bad input the user must fix, 1 for failures at run time.
 */
export class AgentrlError extends Error {
  /** The process exit code this error ends the CLI with. */
  readonly exitCode: number = 1;
  /** One line telling the user what to do next. */
  readonly hint: string | undefined;

  constructor(message: string, options: { hint?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.hint = options.hint;
  }
}

/** A bad flag, a bad combination of flags, or a missing argument. */
export class UsageError extends AgentrlError {
  override readonly exitCode = 2;
}

/**
 * Bad input the user must fix: a config key, a dataset row, a YAML file. The message names the place
 * (`file:line`, `row N`, `field.path`).
 */
export class InputError extends AgentrlError {
  override readonly exitCode = 2;
}

/** An output exists and --force was not given, and similar refusals to destroy user data. */
export class RefusedError extends AgentrlError {
  override readonly exitCode = 2;
}

/** A network-level failure: connection refused, reset, timeout, DNS. Keeps the original as `cause`. */
export class ConnectionError extends AgentrlError {}

/** An HTTP server answered with an error status. */
export class ServerError extends AgentrlError {
  constructor(
    message: string,
    readonly status: number,
    readonly bodyExcerpt: string,
    options: { hint?: string; cause?: unknown } = {},
  ) {
    super(message, options);
  }
}

/** The Python worker failed: carries its exit code and the tail of its log. */
export class WorkerError extends AgentrlError {
  constructor(
    message: string,
    readonly logTail: string = "",
    options: { hint?: string; cause?: unknown } = {},
  ) {
    super(message, options);
  }

  /** The same error with a hint (the run loops add how to resume); keeps the class, and so the exit code. */
  withHint(hint: string): WorkerError {
    const Same = this.constructor as new (message: string, logTail: string, options: { hint?: string; cause?: unknown }) => WorkerError;
    return new Same(this.message, this.logTail, { hint, cause: this });
  }
}

/**
 * The worker refused a command's input: a field its protocol schema refuses, a bad init setting, a missing or malformed
 * batch file. The message names the field or file; like InputError, the user must fix it (exit 2).
 */
export class WorkerInputError extends WorkerError {
  override readonly exitCode = 2;
}

/** Formats any error as the one or two lines a user sees; an OS error no command translated gets its path and words. */
export function describeError(err: unknown): string {
  if (err instanceof AgentrlError) {
    return err.hint ? `error: ${err.message}\nhint: ${err.hint}` : `error: ${err.message}`;
  }
  if (isFsError(err)) return `error: ${describeFsError(err)}`;
  if (err instanceof Error) return `error: ${err.message}`;
  return `error: ${String(err)}`;
}

/** Ends the CLI with a given exit code after the command has already told the user what happened. */
export class ExitError extends AgentrlError {
  override readonly exitCode: number;
  constructor(exitCode: number, message = "") {
    super(message);
    this.exitCode = exitCode;
  }
}
