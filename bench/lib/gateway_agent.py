"""The agent of bench/gateway-overhead.mjs as a Python function agent (``function: gateway_agent.py#agent``): run by
agentrl's long-lived host (agentrl_worker.openai_agent_host), a task per trajectory with an ``openai.AsyncOpenAI``
client on the gateway. It plays the conversation bench/lib/gateway-agent.mjs plays: it offers the row's tools, runs
calc_gsm8k_reward itself with the text of agentrl's built-in tool, and reports no reward (the reward function scores
every loop alike)."""

import json


async def agent(client, row):
    messages = list(row["messages"])
    for _ in range(4):
        reply = await client.chat.completions.create(model="policy", messages=messages, tools=row["tools"])
        message = reply.choices[0].message
        turn = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            turn["tool_calls"] = [call.model_dump() for call in message.tool_calls]
        messages.append(turn)
        if not message.tool_calls:
            return None
        for call in message.tool_calls:
            answer = str(json.loads(call.function.arguments)["answer"])
            score = "1.0" if answer.replace(",", "") == row["ground_truth"] else "0.0"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": f"Current parsed answer='{answer}' reward={score}"})
    return None
