"""What the Python hosts (tool, reward, agent loop) share: agentrl_worker.host_common."""

from __future__ import annotations

import asyncio
import os
import threading

from agentrl_worker.host_common import request_lines


def test_a_request_stream_that_ends_after_the_host_has_shut_down_is_no_error():
    """The CLI sends `shutdown`, the host's loop ends and closes, and only then does the CLI close the host's stdin:
    the thread still reading stdin must stop quietly, not print a traceback ("Event loop is closed") to stderr."""
    read_end, write_end = os.pipe()
    requests = os.fdopen(read_end, "r")
    failures: list[BaseException] = []
    previous_hook = threading.excepthook
    threading.excepthook = lambda args: failures.append(args.exc_value)
    try:
        async def serve_until_shutdown() -> list[dict]:
            seen = []
            async for req in request_lines(requests, lambda _: None):
                seen.append(req)
                if req["op"] == "shutdown":
                    break
            return seen

        os.write(write_end, b'{"op": "ping"}\n{"op": "shutdown"}\n')
        assert [r["op"] for r in asyncio.run(serve_until_shutdown())] == ["ping", "shutdown"]
        reader = next(t for t in threading.enumerate() if t.name == "agentrl-host-stdin")
        os.write(write_end, b'{"op": "late"}\n')  # a line after the loop closed, then the end of the stream
        os.close(write_end)
        reader.join(timeout=10)
        assert not reader.is_alive()
    finally:
        threading.excepthook = previous_hook
        requests.close()
    assert failures == []
