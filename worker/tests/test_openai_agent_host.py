"""agentrl_worker.openai_agent_host: Python agent functions for the OpenAI gateway, many trajectories in one process.

A stub chat-completions server stands in for the gateway: each trajectory's client must reach its own base URL with
its own key, sync and async functions alike, each over a connection pool of its own that is closed when it returns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

WORKER_DIR = Path(__file__).resolve().parents[1]


class _Gateway(BaseHTTPRequestHandler):
    seen: list[tuple[str, str]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        _Gateway.seen.append((self.path, self.headers.get("authorization", "")))
        reply = {
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "policy",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": f"echo {body['messages'][-1]['content']}"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def _run_host(agent_file: Path, target: str, requests: list[dict], env: dict[str, str] | None = None) -> tuple[dict, list[dict]]:
    """Sends `requests`, reads one reply per request, then shuts the host down (shutdown cancels what still runs)."""
    return _run_host_in_phases(agent_file, target, [requests], env)


def _run_host_in_phases(agent_file: Path, target: str, phases: list[list[dict]], env: dict[str, str] | None = None) -> tuple[dict, list[dict]]:
    """_run_host with the requests in phases: a phase is sent once every reply of the one before it is in."""
    args = [sys.executable, "-m", "agentrl_worker.openai_agent_host", "--function", f"{agent_file}#{target}"]
    host = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=WORKER_DIR, env=env)
    assert host.stdin is not None and host.stdout is not None
    try:
        hello = json.loads(host.stdout.readline())
        if not hello["ready"]:
            return hello, []
        replies = []
        for requests in phases:
            host.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
            host.stdin.flush()
            replies += [json.loads(host.stdout.readline()) for _ in requests]
        host.stdin.write(json.dumps({"id": 0, "op": "shutdown"}) + "\n")
        host.stdin.close()
        assert host.wait(timeout=30) == 0
        return hello, replies
    finally:
        host.kill()


def _agents(tmp_path: Path) -> Path:
    file = tmp_path / "agents.py"
    file.write_text(textwrap.dedent(
        """
        def sync_agent(client, row):
            reply = client.chat.completions.create(model="policy", messages=[{"role": "user", "content": row["q"]}])
            return {"reward": 1.0, "said": reply.choices[0].message.content}

        async def async_agent(client, row):
            reply = await client.chat.completions.create(model="policy", messages=[{"role": "user", "content": row["q"]}])
            return {"reward": 0.5, "said": reply.choices[0].message.content}

        def broken(client, row):
            raise ValueError("no answer")

        def tracing_setting(client, row):
            import os
            return {"reward": 0, "tracing_off": os.environ.get("OPENAI_AGENTS_DISABLE_TRACING")}

        SEEN = []

        def pools(client, row):
            # The openai client's httpx client: a report row says which of those seen so far are closed and distinct.
            if row.get("report"):
                return {"reward": 0, "distinct": len({id(h) for h in SEEN}) == len(SEEN), "closed": [h.is_closed for h in SEEN]}
            SEEN.append(client._client)
            return {"reward": 0, "said": client.chat.completions.create(model="policy", messages=[{"role": "user", "content": row["q"]}]).choices[0].message.content}

        async def pools_async(client, row):
            if row.get("report"):
                return pools(client, row)
            SEEN.append(client._client)
            reply = await client.chat.completions.create(model="policy", messages=[{"role": "user", "content": row["q"]}])
            return {"reward": 0, "said": reply.choices[0].message.content}

        NOT_A_FUNCTION = 3
        """
    ))
    return file


def test_each_trajectory_reaches_its_own_url_with_its_own_key_sync_and_async(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    _Gateway.seen = []
    try:
        for target, reward in (("sync_agent", 1.0), ("async_agent", 0.5)):
            runs = [{"id": i, "op": "run", "base_url": f"{base}/t/key{i}/v1", "api_key": f"key{i}", "row": {"q": f"q{i}"}} for i in (1, 2, 3)]
            hello, replies = _run_host(_agents(tmp_path), target, runs)
            assert hello == {"ready": True, "name": target}
            results = {r["id"]: r for r in replies}
            assert results == {i: {"id": i, "ok": True, "result": {"reward": reward, "said": f"echo q{i}"}} for i in (1, 2, 3)}
        assert sorted(_Gateway.seen) == sorted([(f"/t/key{i}/v1/chat/completions", f"Bearer key{i}") for i in (1, 2, 3)] * 2)
    finally:
        server.shutdown()


def test_each_trajectory_has_a_connection_pool_of_its_own_closed_when_its_agent_returns(tmp_path: Path) -> None:
    # One pool shared by every trajectory made each request's CPU grow with the trajectories in flight
    # (bench/agent-host-clients.py).
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for target in ("pools", "pools_async"):
            runs = [{"id": i, "op": "run", "base_url": f"{base}/t/key{i}/v1", "api_key": f"key{i}", "row": {"q": f"q{i}"}} for i in (1, 2, 3)]
            report = [{"id": 4, "op": "run", "base_url": f"{base}/t/key4/v1", "api_key": "key4", "row": {"report": True}}]
            _, replies = _run_host_in_phases(_agents(tmp_path), target, [runs, report])
            assert sorted(r["id"] for r in replies if r["ok"]) == [1, 2, 3, 4]
            assert replies[-1]["result"] == {"reward": 0, "distinct": True, "closed": [True, True, True]}
    finally:
        server.shutdown()


def test_a_raise_fails_that_run_and_the_host_serves_on(tmp_path: Path) -> None:
    hello, replies = _run_host(_agents(tmp_path), "broken", [
        {"id": 1, "op": "run", "base_url": "http://127.0.0.1:1/v1", "api_key": "k", "row": {}},
        {"id": 2, "op": "nope"},
    ])
    assert hello["ready"] is True
    by_id = {r["id"]: r for r in replies}
    assert by_id[1]["ok"] is False and by_id[1]["kind"] == "exception"
    assert by_id[1]["error"] == "ValueError: no answer"
    assert by_id[2] == {"id": 2, "ok": False, "kind": "bad_request", "error": "unknown op 'nope'"}


def test_load_failures_name_the_kind_and_what_the_file_defines(tmp_path: Path) -> None:
    agents = _agents(tmp_path)
    missing, _ = _run_host(agents, "nothing_here", [])
    assert (missing["ready"], missing["kind"], missing["error"]) == (False, "missing", "no function nothing_here")
    assert "sync_agent" in missing["classes"]
    not_function, _ = _run_host(agents, "NOT_A_FUNCTION", [])
    assert (not_function["ready"], not_function["kind"]) == (False, "not_function")
    bad = tmp_path / "bad.py"
    bad.write_text("def agent(client, row):\n    return (\n")
    load, _ = _run_host(bad, "agent", [])
    assert (load["ready"], load["kind"]) == (False, "load")
    assert "bad.py, line" in load["error"]


def test_the_agents_sdk_trace_upload_is_off_unless_the_environment_sets_it(tmp_path: Path) -> None:
    # It would send the trajectory's gateway key to api.openai.com (a 401), or retry at every exit offline.
    run = [{"id": 1, "op": "run", "base_url": "http://127.0.0.1:1/v1", "api_key": "k", "row": {}}]
    clean = {k: v for k, v in os.environ.items() if k != "OPENAI_AGENTS_DISABLE_TRACING"}
    for env, expected in ((clean, "true"), ({**clean, "OPENAI_AGENTS_DISABLE_TRACING": "0"}, "0")):
        _, replies = _run_host(_agents(tmp_path), "tracing_setting", run, env)
        assert replies == [{"id": 1, "ok": True, "result": {"reward": 0, "tracing_off": expected}}]
