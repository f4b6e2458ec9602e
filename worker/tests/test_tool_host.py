"""The Python tool host (agentrl_worker.tool_host): loading verl tool classes, the JSON-lines ops, errors, crashes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

WORKER_DIR = Path(__file__).resolve().parents[1]
FIXTURES = WORKER_DIR.parent / "test" / "fixtures" / "python-tools"
SCHEMA = {"type": "function", "function": {"name": "calc_gsm8k_reward", "description": "d", "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}}


def _host(class_name: str, requests: list[dict], timeout: float = 20, extra: tuple[str, ...] = ()) -> tuple[dict, list[dict], int]:
    """Runs a host over `requests`; returns its start-up line, its replies (sorted by id) and its exit code."""
    args = [sys.executable, "-m", "agentrl_worker.tool_host", "--class", class_name, "--schema", json.dumps(SCHEMA), "--config", '{"type": "native"}', "--path", str(FIXTURES), *extra]
    done = subprocess.run(args, input="".join(json.dumps(r) + "\n" for r in requests), capture_output=True, text=True, timeout=timeout, cwd=WORKER_DIR)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return lines[0], sorted(lines[1:], key=lambda r: (r.get("id") is None, r.get("id") or 0)), done.returncode


def test_verl_gsm8k_tool_runs_unchanged_with_verl_imports_aliased() -> None:
    hello, replies, code = _host(
        f"{FIXTURES / 'gsm8k_tool.py'}#Gsm8kTool",
        [
            {"id": 1, "op": "create", "instance_id": "a", "kwargs": {"create_kwargs": {"ground_truth": "18"}}},
            {"id": 2, "op": "schema"},
        ],
    )
    assert hello["ready"] is True and hello["name"] == "calc_gsm8k_reward"
    assert replies[0] == {"id": 1, "ok": True, "instance_id": "a", "response": {}}
    assert replies[1]["schema"]["function"]["name"] == "calc_gsm8k_reward"
    assert code == 0


def test_instance_state_lives_across_ops_in_order() -> None:
    # Requests run concurrently, so each depends only on ones whose replies came before: one host run per step.
    _, replies, _ = _host(
        "gsm8k_tool.Gsm8kTool",
        [{"id": 1, "op": "create", "instance_id": "a", "kwargs": {"ground_truth": "18"}}, {"id": 9, "op": "execute", "instance_id": "nope", "parameters": {}}],
    )
    assert replies[1]["ok"] is False and replies[1]["kind"] == "unknown_instance" and "'nope'" in replies[1]["error"]


def test_lifecycle_execute_calc_reward_release() -> None:
    from agentrl_worker import tool_host
    import asyncio
    import io

    tool, hello = tool_host.load_tool(f"{FIXTURES / 'gsm8k_tool.py'}#Gsm8kTool", {"type": "native"}, SCHEMA)
    assert hello["ready"] is True
    out = io.StringIO()
    host = tool_host.ToolHost(tool, out)

    async def run() -> None:
        await host.handle({"id": 1, "op": "create", "kwargs": {"create_kwargs": {"ground_truth": "18"}}})
        instance = json.loads(out.getvalue().splitlines()[0])["instance_id"]
        for i, answer in enumerate(["17", "18", "18"]):
            await host.handle({"id": 2 + i, "op": "execute", "instance_id": instance, "parameters": {"answer": answer}, "agent_data": {"trajectory_id": "0:0", "turn": i}})
        await host.handle({"id": 5, "op": "calc_reward", "instance_id": instance})
        await host.handle({"id": 6, "op": "release", "instance_id": instance})
        await host.handle({"id": 7, "op": "calc_reward", "instance_id": instance})

    asyncio.run(run())
    replies = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["response"]["text"] for r in replies[1:4]] == ["Current parsed answer='17' reward=0.0", "Current parsed answer='18' reward=1.0", "Current parsed answer='18' reward=1.0"]
    assert [r["reward"] for r in replies[1:4]] == [-0.05, 0.0, -0.05]
    assert replies[4] == {"id": 5, "ok": True, "reward": 1.0}
    assert replies[5] == {"id": 6, "ok": True}
    assert replies[6]["kind"] == "unknown_instance"


def test_dotted_path_kwargs_agent_data_and_exceptions() -> None:
    _, replies, _ = _host("misbehaving.TrickyTool", [{"id": 1, "op": "create", "instance_id": "t"}])
    assert replies == [{"id": 1, "ok": True, "instance_id": "t", "response": {}}]
    from agentrl_worker import tool_host
    import asyncio
    import io

    tool, _ = tool_host.load_tool("misbehaving.TrickyTool", {}, SCHEMA)
    out = io.StringIO()
    host = tool_host.ToolHost(tool, out)

    async def run() -> None:
        await host.handle({"id": 1, "op": "create", "instance_id": "t"})
        await host.handle({"id": 2, "op": "execute", "instance_id": "t", "parameters": {"mode": "echo"}, "kwargs": {"k": 1}, "agent_data": {"trajectory_id": "3:1", "turn": 2}})
        await host.handle({"id": 3, "op": "execute", "instance_id": "t", "parameters": {"mode": "raise"}})
        await host.handle({"id": 4, "op": "calc_reward", "instance_id": "t", "kwargs": {"bonus": 0.5}})
        await host.handle({"id": 5, "op": "frobnicate"})

    asyncio.run(run())
    replies = [json.loads(line) for line in out.getvalue().splitlines()]
    assert replies[1]["response"]["text"] == "{'kwargs': {'k': 1}, 'trajectory_id': '3:1', 'turn': 2}"
    assert replies[1]["reward"] == 0.5
    assert replies[2]["ok"] is False and replies[2]["kind"] == "exception" and replies[2]["error"] == "ValueError: asked to raise"
    assert replies[3] == {"id": 4, "ok": True, "reward": 2.5}
    assert replies[4]["kind"] == "bad_request"


def test_cancel_stops_an_async_call_and_shutdown_ends_the_host() -> None:
    _, replies, code = _host(
        "misbehaving.TrickyTool",
        [{"id": 1, "op": "create", "instance_id": "t"}, {"id": 2, "op": "execute", "instance_id": "t", "parameters": {"mode": "sleep", "seconds": 30}}, {"op": "cancel", "target": 2}, {"id": 3, "op": "shutdown"}],
    )
    by_id = {r["id"]: r for r in replies}
    assert by_id[2]["kind"] == "cancelled"
    assert by_id[3] == {"id": 3, "ok": True}
    assert code == 0


def test_load_failures_name_the_kind_and_the_classes() -> None:
    hello, _, code = _host(f"{FIXTURES / 'broken_syntax.py'}#Broken", [])
    assert (hello["ready"], hello["kind"], code) == (False, "load", 3)
    assert "SyntaxError" in hello["error"]
    hello, _, _ = _host("misbehaving.NoSuchTool", [])
    assert (hello["kind"], hello["error"]) == ("missing", "no class NoSuchTool")
    assert "TrickyTool" in hello["classes"]
    hello, _, _ = _host("misbehaving.not_a_class", [])
    assert hello["kind"] == "not_class"
    hello, _, _ = _host("no_such_module.Tool", [])
    assert hello["kind"] == "load" and "ModuleNotFoundError" in hello["error"]


def test_prints_go_to_stderr_and_a_crash_ends_the_process() -> None:
    _, replies, code = _host("misbehaving.TrickyTool", [{"id": 1, "op": "create", "instance_id": "t"}, {"id": 2, "op": "execute", "instance_id": "t", "parameters": {"mode": "crash"}}])
    assert code == 7
    assert [r["id"] for r in replies] == [1]


def test_verl_names_beyond_the_aliases_are_not_found_when_verl_is_absent() -> None:
    hello, _, _ = _host("verl.tools.NoSuchTool", [])
    assert hello["kind"] == "load"
    assert hello["error"].startswith("ModuleNotFoundError: No module named 'verl.tools.NoSuchTool' (verl is not installed")


def test_rlimits_turn_a_runaway_allocation_or_write_into_that_call_s_error_and_the_host_serves_on() -> None:
    limits = json.dumps({"memory_bytes": 1024 * 1024 * 1024, "file_size_bytes": 2 * 1024 * 1024})
    # Each request runs alone, in order: one host run with ids whose replies do not depend on each other.
    _, replies, code = _host(
        "hog.HogTool",
        [
            {"id": 1, "op": "create", "instance_id": "a"},
            {"id": 2, "op": "execute", "instance_id": "a", "parameters": {"allocate_mb": 2048}},
            {"id": 3, "op": "execute", "instance_id": "a", "parameters": {"write_mb": 4}},
            {"id": 4, "op": "execute", "instance_id": "a", "parameters": {"allocate_mb": 16}},
            {"id": 5, "op": "execute", "instance_id": "a", "parameters": {"write_mb": 1}},
        ],
        extra=("--rlimits", limits),
    )
    assert [(r["id"], r["ok"]) for r in replies] == [(1, True), (2, False), (3, False), (4, True), (5, True)]
    assert replies[1]["error"].startswith("MemoryError")
    assert "File too large" in replies[2]["error"]
    assert [replies[3]["response"]["text"], replies[4]["response"]["text"]] == ["allocated 16 MB", "wrote 1 MB"]
    assert code == 0
