// A two-stage agent loop: first ask the model for a plan, then let it act on the plan with the built-in tool loop.
//
// Register it under a name and give rows that name in their agent_name column (docs/agent-loops.md):
//
//   actor_rollout_ref:
//     rollout:
//       agent:
//         agent_loops:
//           plan_then_act: examples/agent-loops/plan-then-act.mjs
//
// The loop never touches tokens or masks: generate() appends what the model sampled (mask 1), append() adds messages
// as template deltas (mask 0), and runToolLoop() is the same tool loop rows without agent_name get.

export const PLAN_PROMPT = "Before you solve it, write a short numbered plan. Do not call any tool yet.";
export const ACT_PROMPT = "Now carry out your plan. Use the tools to check your answer, then give it as #### <number>.";

/** @param {import("../../dist/rollout/agent-loop.js").AgentLoopApi} agent */
export default async function planThenAct(agent) {
  // Nothing is sampled yet, so the planning prompt joins the prompt (rendered again with it).
  agent.append([{ role: "user", content: PLAN_PROMPT }]);
  const plan = await agent.generate();
  if (plan.finish) return plan.finish;
  // After the plan, a user turn: a template delta, mask 0. It returns a Finish when the response budget is spent.
  const ended = agent.append([{ role: "user", content: ACT_PROMPT }]);
  if (ended) return ended;
  return agent.runToolLoop();
}
