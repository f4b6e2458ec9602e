/** Failure kinds the tool runner reports as metrics; every one becomes an observation text, never a crash. */
export type ToolErrorKind =
  | "unknown_tool"
  | "bad_arguments"
  | "exception"
  | "timeout"
  | "output_too_large"
  | "invalid_output"
  | "cancelled";

/** Thrown by a tool whose output cannot be shown to the model (not UTF-8, too large). */
export class ToolOutputError extends Error {
  constructor(
    readonly kind: Extract<ToolErrorKind, "invalid_output" | "output_too_large">,
    message: string,
  ) {
    super(message);
    this.name = "ToolOutputError";
  }
}
