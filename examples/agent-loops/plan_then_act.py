"""A two-stage agent loop in Python: first ask the model for a plan, then let it act on the plan with the built-in
tool loop. The same loop as plan-then-act.mjs, on the same API: every call is a request to agentrl, which owns the
tokens and their masks.

Register it under a name and give rows that name in their agent_name column (docs/agent-loops.md):

    actor_rollout_ref:
      rollout:
        agent:
          agent_loops:
            plan_then_act: examples/agent-loops/plan_then_act.py

or, in verl's agent loop file (agent_loop_config_path):

    - name: plan_then_act
      _target_: plan_then_act.py#agent_loop
"""

PLAN_PROMPT = "Before you solve it, write a short numbered plan. Do not call any tool yet."
ACT_PROMPT = "Now carry out your plan. Use the tools to check your answer, then give it as #### <number>."


async def agent_loop(agent):
    # Nothing is sampled yet, so the planning prompt joins the prompt (rendered again with it).
    await agent.append([{"role": "user", "content": PLAN_PROMPT}])
    plan = await agent.generate()
    if plan.get("finish"):
        return plan["finish"]
    # After the plan, a user turn: a template delta, mask 0. It returns a finish when the response budget is spent.
    ended = await agent.append([{"role": "user", "content": ACT_PROMPT}])
    if ended:
        return ended
    return await agent.run_tool_loop()
