"""What the CLI's JSON-lines host processes share (reward_host, tool_host): the exception's last line for error
replies, exiting when the CLI is gone, and keeping the protocol on the real stdout while the user's prints go to
stderr."""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from typing import TextIO


def last_line(exc: BaseException) -> str:
    """`ValueError: bad row`: the last line of the exception's traceback."""
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def exit_when_orphaned(parent: int, interval_s: float = 0.5) -> None:
    """Exits once the CLI is gone (this process is re-parented), even while user code hangs."""

    def loop() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
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
