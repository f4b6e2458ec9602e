"""What the CLI's JSON-lines host processes share (reward_host, tool_host, agent_loop_host): the exception's last line
for error replies, exiting when the CLI is gone, keeping the protocol on the real stdout while the user's prints go
to stderr, and importing the user's class or function from a dotted path or a file."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import inspect
import json
import math
import os
import sys
import threading
import time
import traceback
from typing import Any, AsyncIterator, Callable, Coroutine, Optional, TextIO

from agentrl_worker.verl_compat import STUB_NOTE

#: A host's exit code when the user's code did not load (its start-up line says why).
LOAD_FAILED_EXIT = 3


def last_line(exc: BaseException) -> str:
    """`ValueError: bad row`: the last line of the exception's traceback."""
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


#: What a host does last when the CLI is gone, before it exits (the agent launcher kills the agents it started).
ORPHAN_HOOKS: list[Callable[[], None]] = []


def exit_when_orphaned(parent: int, interval_s: float = 0.5) -> None:
    """Exits once the CLI is gone (this process is re-parented), even while user code hangs."""

    def loop() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                try:
                    for hook in ORPHAN_HOOKS:
                        hook()
                finally:
                    os._exit(1)

    threading.Thread(target=loop, name="agentrl-orphan-watch", daemon=True).start()


def watch_parent(parent: int | None) -> bool:
    """With --parent-pid: False when the CLI is already gone (the host should exit at once), else watch it and True."""
    if parent is None:
        return True
    if os.getppid() != parent:
        return False
    exit_when_orphaned(parent)
    return True


def protocol_stdout() -> TextIO:
    """The real stdout, for protocol lines; file descriptor 1 and sys.stdout then point at stderr, so whatever the
    user's code prints (Python or C) cannot corrupt the protocol."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return replies


def classes_of(module: Any) -> list[str]:
    """The public classes a module defines or imports, for "it defines: ..." in errors."""
    return sorted(n for n, v in vars(module).items() if not n.startswith("_") and inspect.isclass(v))


def import_class_module(class_name: str) -> tuple[Any, str]:
    """The module a target names (`pkg.mod.Name` or `/path/file.py#Name`), and the name in it."""
    if "#" in class_name or class_name.endswith(".py") or ".py:" in class_name:
        file, _, attr = class_name.replace(".py:", ".py#").partition("#")
        path = os.path.abspath(file)
        sys.path.insert(0, os.path.dirname(path))  # the file may import its neighbours
        module_name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"not a Python file: {file}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        return module, attr or module_name
    module_name, _, attr = class_name.rpartition(".")
    if not module_name:
        raise ImportError(f"{class_name!r} is not a dotted path module.Class")
    module = importlib.import_module(module_name)
    if getattr(module, "__agentrl_stub__", False) and not hasattr(module, attr):
        raise ModuleNotFoundError(f"No module named {class_name!r} ({STUB_NOTE})")
    return module, attr


async def request_lines(requests: TextIO, write: Callable[[dict[str, Any]], None]) -> AsyncIterator[dict[str, Any]]:
    """The JSON requests on `requests` until it ends, read on a thread (a blocking read of any stream, with no asyncio
    pipe plumbing); a line that is not a JSON object is answered as a bad request and skipped."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[Optional[str]] = asyncio.Queue()

    def deliver(line: Optional[str]) -> bool:
        try:
            loop.call_soon_threadsafe(lines.put_nowait, line)
            return True
        except RuntimeError:  # the loop has closed: the host shut down before its stdin ended, nobody reads on
            return False

    def read() -> None:
        for line in requests:
            if not deliver(line):
                return
        deliver(None)

    threading.Thread(target=read, name="agentrl-host-stdin", daemon=True).start()
    while (line := await lines.get()) is not None:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except ValueError as exc:
            write({"id": None, "ok": False, "kind": "bad_request", "error": f"not JSON: {exc}"})
            continue
        if isinstance(req, dict):
            yield req
        else:
            write({"id": None, "ok": False, "kind": "bad_request", "error": "a request is a JSON object"})


class TaskHost:
    """A host whose requests run as asyncio tasks keyed by their id: `cancel` (target id) and `shutdown` are handled
    here, every other request by `start`, which returns the coroutine to run, or None when it answered at once."""

    #: The error text of a request cancelled before or while it ran.
    cancelled_text = "the call was cancelled"

    def __init__(self, replies: TextIO) -> None:
        self.replies = replies
        self.tasks: dict[Any, asyncio.Task[None]] = {}

    def write(self, message: dict[str, Any]) -> None:
        self.replies.write(json.dumps(message, allow_nan=False, default=repr) + "\n")
        self.replies.flush()

    def start(self, req: dict[str, Any]) -> Optional[Coroutine[Any, Any, None]]:
        raise NotImplementedError

    def run_request(self, req: dict[str, Any]) -> Optional[Coroutine[Any, Any, None]]:
        """For hosts whose one operation is `run`: its coroutine (`self.run`), or None once any other op is refused."""
        if req.get("op") != "run":
            self.write({"id": req.get("id"), "ok": False, "kind": "bad_request", "error": f"unknown op {req.get('op')!r}"})
            return None
        return self.run(req)  # type: ignore[attr-defined]

    def dispatch(self, req: dict[str, Any]) -> bool:
        """Handles one request; False once the host should stop."""
        op = req.get("op")
        if op == "cancel":
            task = self.tasks.get(req.get("target"))
            if task is not None:
                task.cancel()
            return True
        if op == "shutdown":
            for task in self.tasks.values():
                task.cancel()
            self.write({"id": req.get("id"), "ok": True})
            return False
        work = self.start(req)
        if work is not None:
            request_id = req.get("id")
            task = asyncio.ensure_future(work)
            self.tasks[request_id] = task
            task.add_done_callback(lambda t: self.cancelled_before_start(t, request_id))
        return True

    def cancelled_before_start(self, task: "asyncio.Task[None]", request_id: Any) -> None:
        """A task cancelled before it ran never reaches its own reply: it is written here."""
        if task.cancelled():
            self.tasks.pop(request_id, None)
            self.write({"id": request_id, "ok": False, "kind": "cancelled", "error": self.cancelled_text})

    async def serve(self, requests: TextIO) -> None:
        async for req in request_lines(requests, self.write):
            if not self.dispatch(req):
                break
        if self.tasks:
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)


def import_failure(exc: BaseException) -> dict[str, Any]:
    """The start-up line of a host whose user file did not import: the error's last line (a syntax error's file and
    line too) and the traceback."""
    error = last_line(exc)
    if isinstance(exc, SyntaxError) and exc.filename:
        error = f"{error} ({exc.filename}, line {exc.lineno})"
    return {"ready": False, "kind": "load", "error": error, "traceback": traceback.format_exc(), "classes": []}


def apply_rlimits(limits: dict[str, Any]) -> None:
    """The python code tool's resource limits, for a host's whole life, before the user's code is imported: address
    space (a runaway allocation is a MemoryError in that call, not the machine's memory), largest file written (an
    OSError; CPython ignores SIGXFSZ), and no core dumps."""
    import resource

    for name, key in (("RLIMIT_AS", "memory_bytes"), ("RLIMIT_FSIZE", "file_size_bytes")):
        if limits.get(key) is not None:
            resource.setrlimit(getattr(resource, name), (int(limits[key]), int(limits[key])))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def host_main(
    parser: argparse.ArgumentParser,
    argv: Optional[list[str]],
    load: Callable[[argparse.Namespace], tuple[Any, dict[str, Any]]],
    make_host: Callable[[Any, TextIO], TaskHost],
) -> int:
    """A host's main: parse (adding --path and --parent-pid), load the user's code, print the start-up line, serve
    stdin until it ends. Exit 3 when the code did not load, 1 when the CLI was already gone."""
    parser.add_argument("--path", action="append", default=[], help="a folder put first on sys.path (repeatable)")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process (the CLI) is gone")
    parser.add_argument("--rlimits", default="{}", help='{"memory_bytes", "file_size_bytes"}, as JSON (null: no limit)')
    args = parser.parse_args(argv)
    if not watch_parent(args.parent_pid):
        return 1
    apply_rlimits(json.loads(args.rlimits))
    sys.path[:0] = [os.path.abspath(p) for p in args.path]
    replies = protocol_stdout()
    loaded, hello = load(args)
    replies.write(json.dumps(hello, default=repr) + "\n")
    replies.flush()
    if loaded is None:
        return LOAD_FAILED_EXIT
    asyncio.run(make_host(loaded, replies).serve(sys.stdin))
    return 0


def to_number(value: Any) -> float | None:
    """A finite float from an int/float (numpy scalars included); None for anything else, bools and text included."""
    if isinstance(value, (bool, str, bytes)) or not hasattr(value, "__float__"):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
