import { AgentrlError } from "../errors.js";

/** An inference server (or the router) that did not come up: carries its last log lines. Exit code 1. */
export class ServerStartError extends AgentrlError {
  /** True when agentrl itself stopped it (Ctrl-C during start-up), not a failure of the server. */
  readonly stoppedDuringStartup: boolean;

  constructor(
    message: string,
    readonly logTail: string,
    options: { hint?: string; cause?: unknown; stoppedDuringStartup?: boolean } = {},
  ) {
    super(message, options);
    this.stoppedDuringStartup = options.stoppedDuringStartup ?? false;
  }
}
