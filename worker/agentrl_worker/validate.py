"""`python -m agentrl_worker.validate`: the worker's verdict on protocol messages, one JSON line in, one out.

Each input line is `{"kind": "request" | "reply" | "error_reply" | "event", "cmd"?: ..., "event"?: ..., "message": ...}`
(`cmd` names the command a reply answers, `event` the event); each output line is `{"valid": bool, "error": str|null}`,
in the same order. test/worker-protocol-parity.test.ts holds these verdicts to zod's, message by message.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .protocol import SCHEMA, ConfigError, ProtocolError, check_request, problems, reply_problems


def verdict(case: dict[str, Any]) -> str | None:
    """Why the worker refuses the case's message, or None when it accepts it."""
    kind, message = case["kind"], case["message"]
    if kind == "request":
        try:
            check_request(message)
        except (ConfigError, ProtocolError) as err:
            return str(err)
        return None
    if kind == "reply":
        found = reply_problems(case["cmd"], message)
    elif kind == "error_reply":
        found = problems(SCHEMA["error_reply"], message)
    elif kind == "event":
        found = problems(SCHEMA["events"][case["event"]], message)
    else:
        raise ValueError(f"unknown kind {kind!r}")
    return "; ".join(found) or None


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            error = verdict(json.loads(line))
            sys.stdout.write(json.dumps({"valid": error is None, "error": error}) + "\n")


if __name__ == "__main__":
    main()
