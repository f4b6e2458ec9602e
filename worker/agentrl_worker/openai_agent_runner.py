"""Runs a Python agent function for agentrl's OpenAI gateway (docs/openai-gateway.md).

    python -m agentrl_worker.openai_agent_runner /abs/agent.py#run

The function is called once, as ``fn(client, row)``: ``client`` is an ``openai.OpenAI`` (or ``openai.AsyncOpenAI``
for an ``async def``) already pointed at the trajectory's gateway URL (OPENAI_BASE_URL, OPENAI_API_KEY), ``row`` the
trajectory's row read from stdin as JSON. What it returns is printed as the last stdout line, as JSON: a dict such
as ``{"reward": 1.0, "acc": True}`` (the reward and its extra keys), a number (the reward), or nothing.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import sys
from pathlib import Path
from typing import Any, Callable


def load_function(target: str) -> Callable[..., Any]:
    """``/path/file.py#name`` (``name`` defaults to ``agent``) or ``pkg.mod.name``."""
    if "#" in target or target.endswith(".py"):
        file, _, name = target.partition("#")
        path = Path(file)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"agentrl: cannot load {file}")
        sys.path.insert(0, str(path.parent))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        name = name or "agent"
    else:
        module_name, _, name = target.rpartition(".")
        module = importlib.import_module(module_name)
    fn = getattr(module, name, None)
    if not callable(fn):
        defined = sorted(key for key, value in vars(module).items() if callable(value) and not key.startswith("_"))
        raise SystemExit(f"agentrl: {target} names no function {name}; it defines {', '.join(defined) or 'no functions'}")
    return fn


def result_line(result: Any) -> str | None:
    """The function's return value as the JSON line agentrl reads; None prints nothing."""
    if result is None:
        return None
    return json.dumps(result, default=str)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m agentrl_worker.openai_agent_runner FILE.py#NAME | pkg.mod.NAME", file=sys.stderr)
        return 2
    import openai

    fn = load_function(argv[0])
    row = json.loads(sys.stdin.read() or "{}")
    # No SDK retries: a request the gateway refused will be refused again, and a retried turn starts a new segment.
    if inspect.iscoroutinefunction(fn):

        async def run() -> Any:
            async with openai.AsyncOpenAI(max_retries=0) as client:
                return await fn(client, row)

        result = asyncio.run(run())
    else:
        with openai.OpenAI(max_retries=0) as client:
            result = fn(client, row)
    line = result_line(result)
    if line is not None:
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
