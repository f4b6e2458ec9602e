"""The CPU demo's task (docs/cpu-demo.md) as an ordinary agent on the official `openai` package: no agentrl import.

It offers the model the `open_vault` tool, runs the tool itself when the model calls it (the code is in the row's
tools_kwargs, as verl's data carries it), and reports its answer and reward. agentrl trains it through its OpenAI
gateway (docs/openai-gateway.md), token-exact:

    agentrl train --config examples/openai-agent/cpu-demo.yaml     # as a function: agent(client, row)

It also runs as a plain script, the way any OpenAI-API agent runs (OPENAI_BASE_URL and OPENAI_API_KEY from the
environment, the row as JSON on stdin, the result as the last stdout line):

    command: [python, examples/openai-agent/agent.py]
"""

import json
import sys

OPEN_VAULT = {
    "type": "function",
    "function": {
        "name": "open_vault",
        "description": "open the vault and read its code",
        "parameters": {"type": "object", "properties": {}, "required": []},
    },
}
MAX_TURNS = 2


def agent(client, row):
    """One episode: the model may call open_vault, then answers; the reward is 1 for the vault's code after a call."""
    code = str(row["tools_kwargs"]["open_vault"]["create_kwargs"]["code"])
    messages = list(row["messages"])
    opened, answer = False, None
    for _ in range(MAX_TURNS):
        reply = client.chat.completions.create(model="policy", messages=messages, tools=[OPEN_VAULT])
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            answer = (message.content or "").strip()
            break
        for call in message.tool_calls:
            opened = opened or call.function.name == "open_vault"
            result = code if call.function.name == "open_vault" else f"unknown tool {call.function.name}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    correct = opened and answer == code
    return {"reward": 1.0 if correct else 0.0, "acc": correct, "answer": answer}


if __name__ == "__main__":
    from openai import OpenAI

    result = agent(OpenAI(max_retries=0), json.load(sys.stdin))
    print(json.dumps(result))
