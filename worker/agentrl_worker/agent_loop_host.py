"""One process of the CLI's Python agent loop host: runs a user's agent loop written in Python, the same loop API a JS
module gets (docs/agent-loops.md), for many trajectories at once as asyncio tasks. The loop never touches tokens: every
primitive (generate, parse_tool_calls, call_tools, interact, append, turn_limit, run_tool_loop, messages, tokens) is
a request back to the CLI, which owns the token record and its masks. The protocol is docs/tool-host-protocol.md
("Agent loop host"); in short:

    python -m agentrl_worker.agent_loop_host --loop TARGET [--kwargs JSON] [--path DIR]... [--parent-pid PID]

TARGET is `pkg.mod.name` or `/abs/file.py#name` (a file alone means its `agent_loop`). It names an async function
`agent_loop(agent)`, or a class whose instances (built once with --kwargs) have `async def run(self, agent)`.
Start-up prints `{"ready": true, "name"}` or `{"ready": false, "kind": "load" | "missing" | "not_loop" |
"verl_agent_loop", "error", "classes"}` and exits 3. Then, CLI to host:

    {"id", "op": "run", "trajectory": {"id", "sample", "multi_turn", "has_interaction"}}   start a loop
    {"op": "cancel", "target": id}                                                         the trajectory's deadline
    {"reply": call, "ok": true, "result"} / {"reply": call, "ok": false, "error"}          a primitive's answer
    {"id", "op": "shutdown"}

and host to CLI: `{"call", "run": id, "op", "args"}` (a primitive) and, when the loop ends, `{"id", "ok": true,
"finish": null | {"status", "reason", "error"?}}` or `{"id", "ok": false, "kind": "exception" | "cancelled", "error",
"traceback"}`.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import sys
import traceback
from typing import Any, Optional, TextIO

from agentrl_worker.host_common import TaskHost, classes_of, host_main, import_class_module, import_failure, last_line

DEFAULT_FUNCTION = "agent_loop"


class PrimitiveError(Exception):
    """The CLI refused a primitive (a bad argument, or interact() without a simulated user)."""


class Agent:
    """One trajectory's primitives. Everything the loop learns or changes goes through the CLI; finishes are dicts
    `{"status", "reason", "error"?}` as in the JS API, and the first one ends the trajectory."""

    def __init__(self, host: "AgentLoopHost", run: Any, trajectory: dict[str, Any]) -> None:
        self._host = host
        self._run = run
        self.id: str = trajectory.get("id", "")
        self.sample: dict[str, Any] = trajectory.get("sample") or {}
        self.multi_turn: dict[str, Any] = trajectory.get("multi_turn") or {}
        self.has_interaction: bool = bool(trajectory.get("has_interaction"))

    async def _call(self, op: str, **args: Any) -> Any:
        return await self._host.call(self._run, op, args)

    async def generate(self, max_new_tokens: Optional[int] = None) -> dict[str, Any]:
        """`{"ids", "text", "finish_reason", "finish"?}`: the sampled turn, appended by the CLI with mask 1.
        `max_new_tokens` caps this turn below the budget left; a turn cut there does not end the trajectory."""
        return await self._call("generate", max_new_tokens=max_new_tokens)

    async def parse_tool_calls(self) -> Optional[dict[str, Any]]:
        """The last turn's calls and parse errors (`{"calls", "errors", ...}`), or None when it attempted none."""
        return await self._call("parse_tool_calls")

    async def call_tools(self, calls: Any) -> Optional[dict[str, Any]]:
        """Runs what parse_tool_calls returned, or a list of `{"name", "arguments"}`; observations get mask 0."""
        return await self._call("call_tools", calls=calls)

    async def interact(self) -> Optional[dict[str, Any]]:
        return await self._call("interact")

    async def append(self, messages: list[dict[str, Any]]) -> Optional[dict[str, Any]]:
        return await self._call("append", messages=messages)

    async def turn_limit(self, attempted_call: bool) -> Optional[dict[str, Any]]:
        return await self._call("turn_limit", attempted_call=attempted_call)

    async def run_tool_loop(self) -> dict[str, Any]:
        return await self._call("run_tool_loop")

    async def messages(self) -> list[dict[str, Any]]:
        return await self._call("messages")

    async def tokens(self) -> dict[str, Any]:
        """`{"ids", "mask", "promptLength", "responseLength", "assistantTurns"}`: copies."""
        return await self._call("tokens")


def is_verl_agent_loop(cls: type) -> bool:
    return any(base.__name__ == "AgentLoopBase" for base in inspect.getmro(cls))


def load_loop(target: str, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The loop as `async (agent) -> finish`, or None with the start-up line that says why not."""
    if target.endswith(".py"):
        target = f"{target}#{DEFAULT_FUNCTION}"
    try:
        module, attr = import_class_module(target)
    except BaseException as exc:  # SyntaxError, ImportError, anything raised at import
        return None, import_failure(exc)
    names = sorted(n for n, v in vars(module).items() if not n.startswith("_") and callable(v) and getattr(v, "__module__", None) == module.__name__)
    if not hasattr(module, attr):
        return None, {"ready": False, "kind": "missing", "error": f"no function or class {attr}", "classes": names}
    value = getattr(module, attr)
    if inspect.isclass(value):
        if is_verl_agent_loop(value):
            return None, {
                "ready": False,
                "kind": "verl_agent_loop",
                "error": f"{attr} is a verl AgentLoopBase class: it tokenizes and calls the server itself, which agentrl's loops leave to the CLI",
                "classes": classes_of(module),
            }
        try:
            instance = value(**kwargs)
        except BaseException as exc:
            return None, {"ready": False, "kind": "init", "error": last_line(exc), "traceback": traceback.format_exc(), "classes": names}
        run = getattr(instance, "run", None)
        if not inspect.iscoroutinefunction(run):
            return None, {"ready": False, "kind": "not_loop", "error": f"{attr} has no `async def run(self, agent)`", "classes": names}
        return run, {"ready": True, "name": attr}
    if not inspect.iscoroutinefunction(value):
        what = "a function, but not async" if callable(value) else f"a {type(value).__name__}"
        return None, {"ready": False, "kind": "not_loop", "error": f"{attr} is {what}: an agent loop is `async def {attr}(agent)`", "classes": names}
    return value, {"ready": True, "name": attr}


class AgentLoopHost(TaskHost):
    cancelled_text = "the loop was cancelled at the trajectory's deadline"

    def __init__(self, loop_fn: Any, replies: TextIO) -> None:
        super().__init__(replies)
        self.loop_fn = loop_fn
        self.calls: dict[int, asyncio.Future[Any]] = {}
        self.next_call = 1

    async def call(self, run: Any, op: str, args: dict[str, Any]) -> Any:
        call_id = self.next_call
        self.next_call += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.calls[call_id] = future
        try:
            self.write({"call": call_id, "run": run, "op": op, "args": args})
            return await future
        finally:
            self.calls.pop(call_id, None)

    def answer(self, message: dict[str, Any]) -> None:
        future = self.calls.get(message.get("reply"))  # type: ignore[arg-type]
        if future is None or future.done():
            return
        if message.get("ok"):
            future.set_result(message.get("result"))
        else:
            future.set_exception(PrimitiveError(str(message.get("error"))))

    async def run(self, req: dict[str, Any]) -> None:
        run_id = req.get("id")
        reply: dict[str, Any] = {"id": run_id}
        try:
            finish = await self.loop_fn(Agent(self, run_id, req.get("trajectory") or {}))
            self.write({**reply, "ok": True, "finish": finish})
        except asyncio.CancelledError:
            self.write({**reply, "ok": False, "kind": "cancelled", "error": self.cancelled_text})
        except BaseException as exc:  # SystemExit too: the host keeps serving the other trajectories
            self.write({**reply, "ok": False, "kind": "exception", "error": last_line(exc), "traceback": traceback.format_exc()})
        finally:
            self.tasks.pop(run_id, None)

    def start(self, req: dict[str, Any]) -> Any:
        if "reply" in req:
            self.answer(req)
            return None
        return self.run_request(req)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl_worker.agent_loop_host")
    parser.add_argument("--loop", required=True, help="pkg.mod.name, /path/file.py#name, or /path/file.py (its agent_loop)")
    parser.add_argument("--kwargs", default="{}", help="keyword arguments of a loop class, as JSON")
    return host_main(parser, argv, lambda args: load_loop(args.loop, json.loads(args.kwargs)), AgentLoopHost)


if __name__ == "__main__":
    sys.exit(main())
