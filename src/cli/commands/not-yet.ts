import { AgentrlError } from "../../errors.js";

/** Thrown by commands whose implementation has not landed yet, naming the tracking issue. */
export function notYetAvailable(command: string, issue: number): never {
  throw new AgentrlError(`'agentrl ${command}' is not available in this build yet`, {
    hint: `it is tracked in issue #${issue}; see the README for what works today`,
  });
}
