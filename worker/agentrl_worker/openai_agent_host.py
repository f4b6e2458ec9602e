"""The host of Python agent functions for agentrl's OpenAI gateway (docs/openai-gateway.md): one process imports the
user's function (and `openai`) once, then runs it for many trajectories at once, each as an asyncio task with a
client of its own pointed at that trajectory's gateway URL.

    python -m agentrl_worker.openai_agent_host --function /abs/agent.py#name [--path DIR]... [--parent-pid PID]

The function is ``fn(client, row)``: ``async def`` gets an ``openai.AsyncOpenAI``; a plain function gets an
``openai.OpenAI`` and runs in a thread of its own. Its return value is the agent's result: ``{"reward": x, ...}``, a
number, or None. Start-up prints ``{"ready": true, "name"}`` or ``{"ready": false, "kind": "load" | "missing" |
"not_function", "error", "classes"}`` (``classes``: the functions the file defines) and exits 3. Then, CLI to host:

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
import os
import ssl
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional, TextIO

from agentrl_worker.host_common import TaskHost, host_main, import_class_module, import_failure, last_line

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
    names = sorted(key for key, value in vars(module).items() if inspect.isfunction(value) and not key.startswith("_"))
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
        import httpx  # openai's own HTTP library

        self.httpx = httpx
        self.threads = ThreadPoolExecutor(max_workers=SYNC_THREADS, thread_name_prefix="agentrl-agent")
        # Every client verifies TLS with this one context: httpx builds a context per client otherwise (~28 ms of CPU,
        # more than a trajectory's own requests), the gateway is plain HTTP on loopback anyway.
        self.tls = ssl.create_default_context()

    async def call(self, req: dict[str, Any]) -> Any:
        # No SDK retries: a request the gateway refused is refused again, and a retried turn starts a new segment.
        # Each trajectory gets a connection pool of its own, closed when its agent returns: one pool shared by every
        # trajectory in flight made each request cost more the more were in flight (httpcore matches requests to
        # connections across the whole pool: 5.7 ms of CPU a request at 64 in flight, 6.5 at 256, against 2.0 with a
        # pool per trajectory, which costs 0.1 ms to make; bench/agent-host-clients.py).
        client_args = {"base_url": req["base_url"], "api_key": req["api_key"], "max_retries": 0}
        row = req.get("row") or {}
        if inspect.iscoroutinefunction(self.fn):
            async with self.httpx.AsyncClient(timeout=None, verify=self.tls) as http:
                return await self.fn(self.openai.AsyncOpenAI(**client_args, http_client=http), row)
        with self.httpx.Client(timeout=None, verify=self.tls) as http:
            client = self.openai.OpenAI(**client_args, http_client=http)
            return await asyncio.get_running_loop().run_in_executor(self.threads, self.fn, client, row)

    async def run(self, req: dict[str, Any]) -> None:
        run_id = req.get("id")
        try:
            result = await self.call(req)
            self.write({"id": run_id, "ok": True, "result": json.loads(json.dumps(result, default=str))})
        except asyncio.CancelledError:
            self.write({"id": run_id, "ok": False, "kind": "cancelled", "error": self.cancelled_text})
        except BaseException as exc:  # SystemExit too: the host keeps serving the other trajectories
            self.write({"id": run_id, "ok": False, "kind": "exception", "error": last_line(exc), "traceback": traceback.format_exc()})
        finally:
            self.tasks.pop(run_id, None)

    def start(self, req: dict[str, Any]) -> Any:
        return self.run_request(req)


#: The OpenAI Agents SDK uploads traces to api.openai.com with OPENAI_API_KEY, here a trajectory's gateway key: a
#: 401 online, retries that hold up every exit offline. Off unless the user's environment says otherwise.
AGENTS_TRACING_OFF = ("OPENAI_AGENTS_DISABLE_TRACING", "true")


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault(*AGENTS_TRACING_OFF)
    parser = argparse.ArgumentParser(prog="python -m agentrl_worker.openai_agent_host")
    parser.add_argument("--function", required=True, help="pkg.mod.name, /path/file.py#name, or /path/file.py (its agent)")
    return host_main(parser, argv, lambda args: load_function(args.function), OpenaiAgentHost)


if __name__ == "__main__":
    sys.exit(main())
