"""One process of the CLI's Python reward pool: `python -m agentrl_worker.reward_host FILE NAME [--parent-pid PID]`.

It loads the user's reward file once (as verl's custom_reward_function does), finds the function NAME and then
answers JSON lines on stdin/stdout:

- start-up: one line, `{"ready": true, "functions": [...]}`, or `{"ready": false, "kind": "load" | "missing" | "not_callable",
  "error": "...", "functions": [...]}` and exit code 3;
- each request `{"batch": [{"id", "data_source", "solution_str", "ground_truth", "extra_info", "reward_kwargs"}, ...]}`
  gets one reply line per call, in order: `{"id", "ok": true, "score": float, "extra": {...}}` or
  `{"id", "ok": false, "error": "<the exception's last line>", "traceback": "..."}`.

The function is called the way verl's reward manager calls it:
`fn(data_source=..., solution_str=..., ground_truth=..., extra_info=..., **reward_kwargs)`. It may return a number or a
dict with a numeric "score"; the dict's other keys are verl's reward_extra_info. Anything the function prints goes to
stderr, so it cannot corrupt the protocol on stdout. The process ends at end of input, and within a second of the CLI
being gone (the CLI may be SIGKILLed while a reward function hangs, so nothing reads stdin then).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import sys
import traceback
from typing import Any, Callable, TextIO

from agentrl_worker.host_common import LOAD_FAILED_EXIT, last_line, protocol_stdout, to_number, watch_parent


def public_functions(module: Any) -> list[str]:
    """The functions a module defines or imports, by name, for "no such function" errors."""
    return sorted(n for n, v in vars(module).items() if not n.startswith("_") and inspect.isfunction(v))


def load_reward(file: str, name: str) -> tuple[Callable[..., Any] | None, dict[str, Any]]:
    """The reward function, or None with the start-up line that says why not."""
    path = os.path.abspath(file)
    sys.path.insert(0, os.path.dirname(path))  # the file may import its neighbours
    spec = importlib.util.spec_from_file_location("custom_module", path)
    if spec is None or spec.loader is None:
        return None, {"ready": False, "kind": "load", "error": f"not a Python file: {file}", "functions": []}
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_module"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # a SyntaxError, an ImportError, anything raised at import
        return None, {"ready": False, "kind": "load", "error": last_line(exc), "traceback": traceback.format_exc(), "functions": []}
    functions = public_functions(module)
    if not hasattr(module, name):
        return None, {"ready": False, "kind": "missing", "error": f"no function {name}", "functions": functions}
    fn = getattr(module, name)
    if not callable(fn):
        return None, {"ready": False, "kind": "not_callable", "error": f"{name} is a {type(fn).__name__}, not a function", "functions": functions}
    return fn, {"ready": True, "functions": functions}


def plain(value: Any) -> Any:
    """A JSON-safe copy of a reward_extra_info value: numpy scalars become numbers, NaN/inf and unknown types text."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    number = to_number(value)
    return number if number is not None else repr(value)


def describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def score_one(fn: Callable[..., Any], call: dict[str, Any]) -> dict[str, Any]:
    """One reply line for one call."""
    reply: dict[str, Any] = {"id": call.get("id")}
    try:
        result = fn(
            data_source=call.get("data_source"),
            solution_str=call.get("solution_str"),
            ground_truth=call.get("ground_truth"),
            extra_info=call.get("extra_info"),
            **(call.get("reward_kwargs") or {}),
        )
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: the host must keep answering
        return {**reply, "ok": False, "error": last_line(exc), "traceback": traceback.format_exc()}
    expected = "expected a finite number or a dict with a finite numeric 'score'"
    if isinstance(result, dict):
        if "score" not in result:
            return {**reply, "ok": False, "error": f"returned a dict without 'score' (keys: {sorted(map(str, result))}); {expected}"}
        score = to_number(result["score"])
        if score is None:
            return {**reply, "ok": False, "error": f"returned score {describe(result['score'])}; {expected}"}
        extra = {str(k): plain(v) for k, v in result.items() if k != "score"}
        return {**reply, "ok": True, "score": score, "extra": extra}
    score = to_number(result)
    if score is None:
        return {**reply, "ok": False, "error": f"returned {describe(result)}; {expected}"}
    return {**reply, "ok": True, "score": score, "extra": {}}


def serve(fn: Callable[..., Any], requests: TextIO, replies: TextIO) -> None:
    for line in requests:
        if not line.strip():
            continue
        for call in json.loads(line).get("batch", []):
            replies.write(json.dumps(score_one(fn, call), allow_nan=False) + "\n")
            replies.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl_worker.reward_host")
    parser.add_argument("file", help="the reward file (custom_reward_function.path)")
    parser.add_argument("name", help="the function (custom_reward_function.name)")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process (the CLI) is gone")
    args = parser.parse_args(argv)
    if not watch_parent(args.parent_pid):
        return 1
    replies = protocol_stdout()
    fn, hello = load_reward(args.file, args.name)
    replies.write(json.dumps(hello) + "\n")
    replies.flush()
    if fn is None:
        return LOAD_FAILED_EXIT
    serve(fn, sys.stdin, replies)
    return 0


if __name__ == "__main__":
    sys.exit(main())
