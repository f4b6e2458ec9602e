"""A rank launched with --parent-pid exits once that process is gone (a CLI killed with SIGKILL cannot tell it)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

WORKER_DIR = Path(__file__).resolve().parents[1]

CHILD = """
import sys, time
from agentrl_worker.__main__ import watch_parent
watch_parent(int(sys.argv[1]), interval_s=0.1)
print("watching", flush=True)
time.sleep(60)
"""


def _watcher_of(parent: subprocess.Popen) -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(parent.pid)],
        cwd=WORKER_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "watching"
    return child


def test_exits_when_the_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    child = _watcher_of(parent)
    try:
        parent.kill()
        parent.wait()
        assert child.wait(timeout=20) == 1
        assert f"the CLI (pid {parent.pid}) is gone" in child.stderr.read()
    finally:
        child.kill()
        parent.kill()


def test_keeps_running_while_the_parent_lives() -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    child = _watcher_of(parent)
    try:
        time.sleep(1.0)  # ten checks
        assert child.poll() is None
    finally:
        child.kill()
        parent.kill()
        parent.wait()
