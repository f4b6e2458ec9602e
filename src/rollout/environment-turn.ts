/**
 * The environment's answer to an assistant turn, appended as a template delta (mask 0): the observations of its
 * tool calls, or the simulated user's reply. Each returns a Finish when the trajectory ends there.
 */
import type { Interaction } from "../interactions/index.js";
import type { ChatMessage } from "../chat/index.js";
import type { ParseResult } from "../parsers/index.js";
import { executeCalls, toolSegmentOf } from "./tool-calls.js";
import { mapPacked } from "../packed-list.js";
import type { Finish, TrajectoryInFlight } from "./trajectory-state.js";

/** Runs the last assistant turn's calls and appends their observations. */
export async function toolTurn(run: TrajectoryInFlight, parsed: ParseResult): Promise<Finish | undefined> {
  const { log } = run;
  const started = performance.now();
  // The calls come from the last assistant turn, the one just sampled.
  const records = await executeCalls(run, parsed, run.conversation.assistantTurns - 1);
  log.toolMs += performance.now() - started;
  for (const record of records) {
    log.calls.push(record);
    if (typeof record.step_reward === "number" && record.error_kind == null) log.toolRewards.push(record.step_reward);
  }
  log.toolSegments.push(toolSegmentOf(records));
  // Packed whatever the tier: the delta's render and the segment kind read this list (packed-list.ts).
  return appendEnvironment(run, mapPacked(records, (record) => ({ role: "tool", content: record.response })));
}

/** Asks the simulated user for its reply and appends it; its last reply ends the trajectory. */
export async function interactionTurn(run: TrajectoryInFlight, interaction: Interaction, instanceId: string): Promise<Finish | undefined> {
  const reply = await interaction.generateResponse(
    instanceId,
    run.conversation.messages as Parameters<typeof interaction.generateResponse>[1],
    run.sample.interactionKwargs,
  );
  run.log.turnScores.push(reply.turnScore);
  const environment: ChatMessage[] = [{ role: "user", content: reply.text }];
  if (!reply.shouldTerminate) return appendEnvironment(run, environment);
  // verl appends the closing user turn too; the trajectory is complete either way, room or not.
  const closing = run.conversation.appendEnvironment(environment, { maxResponseLength: run.ctx.maxResponseLength });
  if (closing.appended) run.log.userTurns += 1;
  return { status: "completed", reason: "interaction_done" };
}

/** Appends the environment's messages, unless they would leave no room for another sampled token. */
export function appendEnvironment(run: TrajectoryInFlight, messages: readonly ChatMessage[]): Finish | undefined {
  const appended = run.conversation.appendEnvironment(messages, { maxResponseLength: run.ctx.maxResponseLength });
  if (!appended.appended) return { status: "truncated", reason: "response_budget" };
  run.log.userTurns += 1;
  return undefined;
}
