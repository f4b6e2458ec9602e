"""The host of Python agent functions for agentrl's OpenAI gateway (docs/openai-gateway.md): one process imports the
user's function (and `openai`) once, then runs it for many trajectories at once, each as an asyncio task with a
client of its own pointed at that trajectory's gateway URL.

    python -m agentrl_worker.openai_agent_host --function /abs/agent.py#name [--path DIR]... [--parent-pid PID]

The function is ``fn(client, row)``: ``async def`` gets an ``openai.AsyncOpenAI``; a plain function gets an
``openai.OpenAI`` and runs in a thread of its own. Its return value is the agent's result: ``{"reward": x, ...}``, a
number, or None. Start-up prints ``{"ready": true, "name"}`` or ``{"ready": false, "kind": "load" | "missing" |
"not_function", "error", "classes"}`` and exits 3. Then, CLI to host:

    {"id", "op": "run", "base_url", "api_key", "row"}     run the function for one trajectory
    {"op": "cancel", "target": id}                         the trajectory's deadline
    {"id", "op": "shutdown"}

and host to CLI: ``{"id", "ok": true, "result"}`` or ``{"id", "ok": false, "kind": "exception" | "cancelled", "error",
"traceback"}``. A plain function cannot be stopped inside its thread: at the deadline its task is cancelled and its
later requests are refused by the gateway.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, TextIO

from agentrl_worker.host_common import TaskHost, classes_of, host_main, import_class_module, import_failure, last_line

DEFAULT_FUNCTION = "agent"
#: Threads for plain (sync) functions: every trajectory in flight holds one while its agent runs.
SYNC_THREADS = 512


def load_function(target: str) -> tuple[Optional[tuple[Callable[..., Any], Any]], dict[str, Any]]:
    """`/abs/file.py#name` (a file alone means its `agent`) or `pkg.mod.name` with the openai package, and the start-up
    line."""
    try:
        import openai
    except ImportError:
        return None, {"ready": False, "kind": "load", "error": f"the openai package is not installed for {sys.executable} (pip install openai)", "classes": []}
    if target.endswith(".py"):
        target = f"{target}#{DEFAULT_FUNCTION}"
    try:
        module, attr = import_class_module(target)
    except Exception as exc:  # the user's file: any error is a load failure to report
        return None, import_failure(exc)
    names = classes_of(module)
    fn = getattr(module, attr, None)
    if fn is None:
        return None, {"ready": False, "kind": "missing", "error": f"no function {attr}", "classes": names}
    if not callable(fn) or inspect.isclass(fn):
        return None, {"ready": False, "kind": "not_function", "error": f"{attr} is not a function of (client, row)", "classes": names}
    return (fn, openai), {"ready": True, "name": attr}


class OpenaiAgentHost(TaskHost):
    cancelled_text = "the agent was cancelled at the trajectory's deadline"

    def __init__(self, loaded: tuple[Callable[..., Any], Any], replies: TextIO) -> None:
        super().__init__(replies)
        self.fn, self.openai = loaded
        self.threads = ThreadPoolExecutor(max_workers=SYNC_THREADS, thread_name_prefix="agentrl-agent")

    async def call(self, req: dict[str, Any]) -> Any:
        # No SDK retries: a request the gateway refused is refused again, and a retried turn starts a new segment.
        client_args = {"base_url": req["base_url"], "api_key": req["api_key"], "max_retries": 0}
        row = req.get("row") or {}
        if inspect.iscoroutinefunction(self.fn):
            async with self.openai.AsyncOpenAI(**client_args) as client:
                return await self.fn(client, row)

        def sync() -> Any:
            with self.openai.OpenAI(**client_args) as client:
                return self.fn(client, row)

        return await asyncio.get_running_loop().run_in_executor(self.threads, sync)

    async def run(self, req: dict[str, Any]) -> None:
        run_id = req.get("id")
        try:
            result = await self.call(req)
            self.write({"id": run_id, "ok": True, "result": json.loads(json.dumps(result, default=str))})
        except asyncio.CancelledError:
            self.write({"id": run_id, "ok": False, "kind": "cancelled", "error": self.cancelled_text})
        except BaseException as exc:  # SystemExit too: the host keeps serving the other trajectories
            self.write({"id": run_id, "ok": False, "kind": "exception", "error": f"{type(exc).__name__}: {last_line(exc)}", "traceback": traceback.format_exc()})
        finally:
            self.tasks.pop(run_id, None)

    def start(self, req: dict[str, Any]) -> Any:
        return self.run_request(req)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl_worker.openai_agent_host")
    parser.add_argument("--function", required=True, help="pkg.mod.name, /path/file.py#name, or /path/file.py (its agent)")
    return host_main(parser, argv, lambda args: load_function(args.function), OpenaiAgentHost)


if __name__ == "__main__":
    sys.exit(main())
