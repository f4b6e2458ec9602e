"""agentrl_worker.agent_launcher: the process that starts the CLI's command agents, each in its own process group.

Each test talks to a real launcher in JSON lines, as the CLI does: the row on stdin, the last stdout line and the
stderr tail back, exit codes and signals, programs that cannot start, the deadline's cancel killing a whole process
group, what an agent leaves behind killed when it exits, and hundreds of agents at once.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

WORKER_DIR = Path(__file__).resolve().parents[1]
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


class Launcher:
    def __init__(self, args: Optional[list[str]] = None, env: Optional[dict[str, str]] = None) -> None:
        self.process = subprocess.Popen(
            args or [sys.executable, "-m", "agentrl_worker.agent_launcher"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=WORKER_DIR, env=env,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin = self.process.stdin
        # Read on a thread, so that a reply that never comes fails the test instead of hanging it.
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line) for line in self.process.stdout], daemon=True).start()  # type: ignore[union-attr]
        assert self.reply() == {"ready": True, "name": "agent_launcher"}

    def send(self, message: dict[str, Any]) -> None:
        self.stdin.write(json.dumps(message) + "\n")
        self.stdin.flush()

    def run(self, run_id: int, script: str, input: str = "", cwd: str = "/", env: Optional[dict[str, str]] = None) -> None:
        self.send({"id": run_id, "op": "run", "argv": ["/bin/sh", "-c", script], "env": env or ENV, "cwd": cwd, "input": input})

    def reply(self, timeout_s: float = 30.0) -> dict[str, Any]:
        try:
            return json.loads(self.lines.get(timeout=timeout_s))
        except queue.Empty:
            raise AssertionError(f"no reply from the launcher within {timeout_s} s") from None

    def close(self) -> int:
        """Shuts it down as the CLI does (unless a test did), then makes sure it is gone."""
        try:
            if not self.stdin.closed:
                self.send({"id": 0, "op": "shutdown"})
                assert self.reply() == {"id": 0, "ok": True}
                self.stdin.close()
            return self.process.wait(timeout=30)
        finally:
            self.process.kill()


@pytest.fixture
def launcher() -> Iterator[Launcher]:
    started = Launcher()
    try:
        yield started
    finally:
        assert started.close() == 0


def killed(run_id: int) -> dict[str, Any]:
    """The reply of an agent SIGKILLed before it wrote anything."""
    return {"id": run_id, "ok": True, "last_line": None, "code": None, "signal": "SIGKILL", "stderr_tail": []}


def alive(pid: int) -> bool:
    """Running (a zombie that nothing reaps, as a killed orphan may be in a container, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def gone_within(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return False


def wait_for_file(path: Path, seconds: float = 10.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} was never written")


def test_a_run_gets_the_row_on_stdin_and_replies_with_its_last_line_and_stderr_tail(launcher: Launcher, tmp_path: Path) -> None:
    script = 'read row; echo "thinking" >&2; echo "got $row"; echo "{\\"reward\\": 1}"; echo; echo "   "; pwd >&2'
    launcher.run(7, script, input="hello row", cwd=str(tmp_path))
    assert launcher.reply() == {"id": 7, "ok": True, "last_line": '{"reward": 1}', "code": 0, "signal": None, "stderr_tail": ["thinking", str(tmp_path)]}
    # Without a trailing newline the last line still counts; no output at all is a null last line.
    launcher.run(8, "printf 'partial'")
    assert launcher.reply()["last_line"] == "partial"
    launcher.run(9, "true")
    assert launcher.reply()["last_line"] is None


def test_the_environment_is_the_one_the_request_gives() -> None:
    launcher = Launcher(env={**os.environ, "PYTHONPATH": str(WORKER_DIR), "LAUNCHER_ONLY": "1"})
    try:
        launcher.run(1, 'echo "${OPENAI_API_KEY:-none} ${LAUNCHER_ONLY:-unset}"', env={**ENV, "OPENAI_API_KEY": "k1"})
        assert launcher.reply()["last_line"] == "k1 unset"
    finally:
        launcher.close()


def test_a_non_zero_exit_or_a_signal_is_reported_with_the_stderr_tail(launcher: Launcher) -> None:
    # Blank lines, Python's ^~~~ marker lines and colour codes stay out of the tail; only the last 40 lines stay.
    script = "for i in $(seq 1 50); do echo line $i >&2; done; printf '\\033[31mValueError: bad\\033[0m\\n   ^^^~~\\n\\n' >&2; exit 3"
    launcher.run(1, script)
    reply = launcher.reply()
    assert (reply["ok"], reply["code"], reply["signal"]) == (True, 3, None)
    assert reply["stderr_tail"][-1] == "ValueError: bad"
    assert reply["stderr_tail"][0] == "line 12" and len(reply["stderr_tail"]) == 40
    launcher.run(2, "kill -TERM $$")
    assert launcher.reply() == {**killed(2), "signal": "SIGTERM"}


def test_a_program_that_cannot_start_is_an_error_and_the_launcher_goes_on(launcher: Launcher, tmp_path: Path) -> None:
    launcher.send({"id": 1, "op": "run", "argv": [str(tmp_path / "missing-agent")], "env": ENV, "cwd": "/", "input": ""})
    assert launcher.reply() == {"id": 1, "ok": False, "kind": "spawn", "error": "No such file or directory (ENOENT)"}
    launcher.send({"id": 2, "op": "run", "argv": ["/bin/true"], "env": ENV, "cwd": str(tmp_path / "no-folder"), "input": ""})
    assert launcher.reply() == {"id": 2, "ok": False, "kind": "spawn", "error": f"No such file or directory (ENOENT): {tmp_path / 'no-folder'}"}
    (tmp_path / "not-executable").write_text("#!/bin/sh\n")
    launcher.send({"id": 3, "op": "run", "argv": [str(tmp_path / "not-executable")], "env": ENV, "cwd": "/", "input": ""})
    assert launcher.reply() == {"id": 3, "ok": False, "kind": "spawn", "error": "Permission denied (EACCES)"}
    launcher.run(4, "echo still here")
    assert launcher.reply()["last_line"] == "still here"


def test_a_program_is_looked_for_on_the_agents_path_and_from_its_folder(launcher: Launcher, tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    program = tmp_path / "bin" / "hello-agent"
    program.write_text("#!/bin/sh\necho found $(pwd)\n")
    program.chmod(0o755)
    run = {"op": "run", "argv": ["hello-agent"], "cwd": str(tmp_path), "input": ""}
    launcher.send({**run, "id": 1, "env": {"PATH": f"{tmp_path / 'bin'}:{ENV['PATH']}"}})
    assert launcher.reply()["last_line"] == f"found {tmp_path}"
    launcher.send({**run, "id": 2, "env": ENV})
    assert launcher.reply() == {"id": 2, "ok": False, "kind": "spawn", "error": "No such file or directory (ENOENT)"}
    launcher.send({**run, "id": 3, "env": ENV, "argv": ["./bin/hello-agent"]})
    assert launcher.reply()["last_line"] == f"found {tmp_path}"


def test_cancel_kills_the_agents_whole_process_group_its_grandchild_too(launcher: Launcher, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    launcher.run(5, f"sleep 300 & echo $$ $! > {pids}; wait")
    agent, grandchild = map(int, wait_for_file(pids).split())
    assert alive(agent) and alive(grandchild)
    launcher.send({"op": "cancel", "target": 5})
    assert launcher.reply() == killed(5)
    assert gone_within(grandchild)
    # A cancel for a run that has ended (or never was) is nothing.
    launcher.send({"op": "cancel", "target": 5})
    launcher.run(6, "echo next")
    assert launcher.reply()["last_line"] == "next"


def test_what_an_agent_leaves_running_is_killed_when_it_exits(launcher: Launcher) -> None:
    # The background sleep keeps no pipe open, so only the kill of the group ends it.
    launcher.run(1, "sleep 300 >/dev/null 2>&1 & echo $!")
    reply = launcher.reply()
    assert reply["code"] == 0
    assert gone_within(int(reply["last_line"]))


def test_shutdown_kills_the_agents_still_running(launcher: Launcher, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    launcher.run(1, f"echo $$ > {pids}; exec sleep 300")
    agent = int(wait_for_file(pids))
    launcher.send({"id": 0, "op": "shutdown"})
    replies = [launcher.reply(), launcher.reply()]
    assert {"id": 0, "ok": True} in replies and killed(1) in replies
    launcher.stdin.close()
    assert launcher.process.wait(timeout=30) == 0
    assert gone_within(agent)


def test_the_agents_die_with_the_cli(tmp_path: Path) -> None:
    """The CLI killed with SIGKILL: the launcher, watching its pid, kills its agents' process groups and exits."""
    cli = (
        "import os, subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-m', 'agentrl_worker.agent_launcher', '--parent-pid', str(os.getpid())])\n"
        "time.sleep(300)\n"
    )
    launcher = Launcher([sys.executable, "-c", cli])
    pids = tmp_path / "pids"
    try:
        launcher.run(1, f"sleep 300 & echo $! > {pids}; wait")
        grandchild = int(wait_for_file(pids))
        launcher.process.kill()
        launcher.process.wait()
        assert gone_within(grandchild, seconds=10)
    finally:
        launcher.process.kill()


def test_hundreds_of_agents_run_at_once_each_with_its_own_row_and_result(launcher: Launcher) -> None:
    count = 300
    started = time.monotonic()
    for i in range(count):
        launcher.run(i + 1, 'read row; sleep 1; echo "done $row"', input=f"row-{i}\n")
    replies = {reply["id"]: reply for reply in (launcher.reply() for _ in range(count))}
    elapsed = time.monotonic() - started
    assert sorted(replies) == list(range(1, count + 1))
    assert all(replies[i + 1]["last_line"] == f"done row-{i}" and replies[i + 1]["code"] == 0 for i in range(count))
    # One after another they would take 300 s.
    assert elapsed < 30, elapsed
