"""One process of the CLI's Python tool host: runs one verl tool class (verl's BaseTool async interface) and answers
JSON lines on stdin/stdout. The protocol is docs/tool-host-protocol.md; in short:

    python -m agentrl_worker.tool_host --class CLASS --config JSON --schema JSON [--path DIR]... [--parent-pid PID]

CLASS is a dotted path (`my_pkg.tools.Gsm8kTool`, imported with the --path folders first on sys.path) or a file
(`/abs/tools/gsm8k.py#Gsm8kTool`). Start-up prints one line: `{"ready": true, "name", "schema"}`, or
`{"ready": false, "kind": "load" | "missing" | "not_class" | "init", "error", "traceback", "classes"}` and exits 3.
Then each request `{"id", "op", ...}` gets one reply `{"id", "ok": true, ...}` or `{"id", "ok": false, "kind",
"error", "traceback"}`. Requests run concurrently as asyncio tasks; `cancel` cancels one. Instances live in the tool
object (verl's tools keep `_instance_dict`); the host tracks which instance ids it created so that a call on an
unknown instance gets a clear error. Before the class is imported, `verl.tools.base_tool` and `verl.tools.schemas`
are aliased to agentrl_worker.verl_compat when verl is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import sys
import traceback
from typing import Any, Optional, TextIO

from agentrl_worker.host_common import TaskHost, classes_of, host_main, import_class_module, import_failure, last_line, to_number
from agentrl_worker.verl_compat import OpenAIFunctionToolSchema, _Model, install_verl_aliases



class ToolHostError(Exception):
    """A request the host refuses (unknown op or instance); `kind` goes into the reply."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class AgentData(_Model):
    """The calling trajectory, as agent_data: trajectory_id (`<data_index>:<sample_index>`), turn, messages."""


def load_tool(class_name: str, config: dict[str, Any], schema: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The tool object, or None with the start-up line that says why not."""
    install_verl_aliases()
    try:
        module, attr = import_class_module(class_name)
    except BaseException as exc:  # SyntaxError, ImportError, anything raised at import
        return None, import_failure(exc)
    if not hasattr(module, attr):
        return None, {"ready": False, "kind": "missing", "error": f"no class {attr}", "classes": classes_of(module)}
    cls = getattr(module, attr)
    if not inspect.isclass(cls):
        return None, {"ready": False, "kind": "not_class", "error": f"{attr} is a {type(cls).__name__}, not a class", "classes": classes_of(module)}
    schema_cls = schema_class_for(module)
    try:
        tool = cls(config=config, tool_schema=schema_cls.model_validate(schema))
    except BaseException as exc:
        return None, {"ready": False, "kind": "init", "error": last_line(exc), "traceback": traceback.format_exc(), "classes": classes_of(module)}
    return tool, {"ready": True, "name": getattr(tool, "name", schema.get("function", {}).get("name")), "schema": dump_schema(tool, schema)}


def schema_class_for(module: Any) -> Any:
    """verl's pydantic schema class when verl is installed, else the compat one."""
    schemas = sys.modules.get("verl.tools.schemas")
    return getattr(schemas, "OpenAIFunctionToolSchema", OpenAIFunctionToolSchema)


def dump_schema(tool: Any, fallback: dict[str, Any]) -> dict[str, Any]:
    getter = getattr(tool, "get_openai_tool_schema", None)
    schema = getter() if callable(getter) else None
    if schema is None:
        return fallback
    return schema.model_dump(exclude_none=True) if hasattr(schema, "model_dump") else dict(schema)


def jsonable(value: Any) -> Any:
    """A JSON-safe copy: unknown types become their repr, NaN/inf their text."""
    return json.loads(json.dumps(value, default=repr, allow_nan=True), parse_constant=str)


def response_dict(response: Any) -> dict[str, Any]:
    """verl's ToolResponse (or an old-style str/dict) as `{text?, image?, video?}`."""
    if response is None:
        return {}
    if isinstance(response, str):
        return {"text": response}
    fields = response if isinstance(response, dict) else {k: getattr(response, k, None) for k in ("text", "image", "video")}
    return jsonable({k: v for k, v in fields.items() if k in ("text", "image", "video") and v is not None})


def reward_value(value: Any, what: str) -> Optional[float]:
    if value is None:
        return None
    number = to_number(value)
    if number is None:
        raise ToolHostError("bad_return", f"{what} returned {value!r}, not a finite number")
    return number


class ToolHost(TaskHost):
    def __init__(self, tool: Any, replies: TextIO) -> None:
        super().__init__(replies)
        self.tool = tool
        self.instances: set[str] = set()

    def known(self, instance_id: Any) -> str:
        if instance_id not in self.instances:
            raise ToolHostError("unknown_instance", f"instance {instance_id!r} does not exist in this tool host (never created, or already released)")
        return instance_id

    async def op_create(self, req: dict[str, Any]) -> dict[str, Any]:
        result = await self.tool.create(req.get("instance_id"), **(req.get("kwargs") or {}))
        instance_id, response = (result if isinstance(result, tuple) else (result, None))
        self.instances.add(str(instance_id))
        return {"instance_id": str(instance_id), "response": response_dict(response)}

    async def op_execute(self, req: dict[str, Any]) -> dict[str, Any]:
        instance_id = self.known(req.get("instance_id"))
        kwargs = dict(req.get("kwargs") or {})
        if req.get("agent_data") is not None:
            kwargs["agent_data"] = AgentData(**req["agent_data"])
        result = await self.tool.execute(instance_id, req.get("parameters") or {}, **kwargs)
        response, reward, metrics = (tuple(result) + (None, None))[:3] if isinstance(result, tuple) else (result, None, None)
        return {"response": response_dict(response), "reward": reward_value(reward, "execute"), "metrics": jsonable(metrics or {})}

    async def op_calc_reward(self, req: dict[str, Any]) -> dict[str, Any]:
        reward = await self.tool.calc_reward(self.known(req.get("instance_id")), **(req.get("kwargs") or {}))
        return {"reward": reward_value(reward, "calc_reward")}

    async def op_release(self, req: dict[str, Any]) -> dict[str, Any]:
        instance_id = self.known(req.get("instance_id"))
        self.instances.discard(instance_id)
        await self.tool.release(instance_id, **(req.get("kwargs") or {}))
        return {}

    async def op_schema(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"schema": dump_schema(self.tool, {})}

    async def handle(self, req: dict[str, Any]) -> None:
        reply: dict[str, Any] = {"id": req.get("id")}
        handler = getattr(self, f"op_{req.get('op')}", None)
        try:
            if handler is None:
                raise ToolHostError("bad_request", f"unknown op {req.get('op')!r}")
            self.write({**reply, "ok": True, **(await handler(req))})
        except asyncio.CancelledError:
            self.write({**reply, "ok": False, "kind": "cancelled", "error": self.cancelled_text})
        except ToolHostError as exc:
            self.write({**reply, "ok": False, "kind": exc.kind, "error": str(exc)})
        except BaseException as exc:  # SystemExit too: the host keeps answering
            self.write({**reply, "ok": False, "kind": "exception", "error": last_line(exc), "traceback": traceback.format_exc()})
        finally:
            self.tasks.pop(req.get("id"), None)

    def start(self, req: dict[str, Any]) -> Any:
        return self.handle(req)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl_worker.tool_host")
    parser.add_argument("--class", dest="class_name", required=True, help="module.Class or /path/file.py#Class")
    parser.add_argument("--config", default="{}", help="the YAML entry's config, as JSON")
    parser.add_argument("--schema", default="{}", help="the YAML entry's tool_schema, as JSON")
    return host_main(parser, argv, lambda args: load_tool(args.class_name, json.loads(args.config), json.loads(args.schema)), ToolHost)


if __name__ == "__main__":
    sys.exit(main())
