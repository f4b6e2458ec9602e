"""The launcher of agentrl's command agents (`{kind: openai, command: [...]}`, docs/openai-gateway.md): one small
long-lived process that starts every trajectory's agent for the CLI, so that the CLI never forks itself per
trajectory. A fork of the CLI (a Node process of ~400 MB) cost it ~3.5 ms of CPU per agent, most of it the kernel
copying page tables, and page faults after each one. This process starts agents with os.posix_spawn, which glibc
does with clone(CLONE_VM | CLONE_VFORK): no page-table copy, whatever the size, setsid included (POSIX_SPAWN_SETSID,
done in the child before exec). It is cheaper in this process's own CPU than subprocess (also vfork since Python
3.10) and asyncio's subprocess transports: the agents' pipes are read by plain event-loop callbacks, and one SIGCHLD
handler reaps them all. The launcher is not sandboxed: a `sandbox: bwrap` agent's argv is already bubblewrap's.

    python -m agentrl_worker.agent_launcher [--parent-pid PID]

Start-up prints ``{"ready": true, "name": "agent_launcher"}``. Then, CLI to launcher:

    {"id", "op": "run", "argv", "env", "cwd", "input"}   start one agent
    {"op": "cancel", "target": id}                       the trajectory's deadline: SIGKILL to the agent's process group
    {"id", "op": "shutdown"}                             kill every agent's process group, reply, exit

``env`` is the agent's whole environment (the launcher's own is not inherited), and its ``PATH`` is where a program
without a slash is looked for, as execvp would. Each agent runs in its own session, hence its own process group, in
``cwd``; ``input`` goes to its stdin, which is then closed. When the agent exits, its process group is killed
(whatever it left running: a server, a grandchild) and the launcher replies ``{"id", "ok": true, "last_line", "code",
"signal", "stderr_tail"}``: its last non-empty stdout line (or null), its exit code (null when a signal ended it) or
the signal's name (``"SIGKILL"``), and its last 40 stderr lines that say something (no blank lines, no lines of
Python's ``^~~~`` markers, colour codes removed). An agent that could not start replies ``{"id", "ok": false, "kind":
"spawn", "error"}`` (``error`` like ``No such file or directory (ENOENT)``); one cancelled before it started, ``{"id",
"ok": false, "kind": "cancelled", "error"}``. Agents run concurrently (one event loop; hundreds at once), so replies
come in any order. When the CLI is gone (``--parent-pid``) the launcher kills its agents' process groups and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import re
import resource
import signal
import sys
from collections import deque
from typing import Any, Optional, TextIO

from agentrl_worker.host_common import ORPHAN_HOOKS, TaskHost, host_main, last_line

#: Stderr lines kept: enough for an uncaught exception's message to outlive its stack frames.
STDERR_TAIL = 40
#: Seconds the agent's pipes may stay open once its process group is dead (held by a process that left the group).
DRAIN_S = 1.0
#: Signals Python ignores for itself that an agent must get back at their defaults (as subprocess restores them).
RESET_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)
_COLOUR = re.compile(rb"\x1b\[[0-9;]*m")
_NOTHING = re.compile(rb"[\s^~]*")


class AgentOutput:
    """What an agent wrote: the last non-empty stdout line and the stderr tail, taken as the bytes come."""

    def __init__(self) -> None:
        self.last_line: Optional[bytes] = None
        self.stderr_tail: deque[bytes] = deque(maxlen=STDERR_TAIL)
        self.partial = {1: b"", 2: b""}

    def data(self, stream: int, data: bytes) -> None:
        lines = (self.partial[stream] + data).split(b"\n")
        self.partial[stream] = lines.pop()
        self.take(stream, lines)

    def end(self, stream: int) -> None:
        """The stream is closed: its last line, when it had no newline."""
        if self.partial[stream]:
            self.take(stream, [self.partial[stream]])
            self.partial[stream] = b""

    def take(self, stream: int, lines: list[bytes]) -> None:
        if stream == 1:
            last = next((line for line in reversed(lines) if line.strip()), None)
            if last is not None:
                self.last_line = last
            return
        for line in lines:
            plain = _COLOUR.sub(b"", line.rstrip(b"\r"))
            if not _NOTHING.fullmatch(plain):
                self.stderr_tail.append(plain)


class Agent:
    """One running agent: its pid (its process group's id too), the launcher's ends of its pipes, how it ended."""

    def __init__(self, loop: asyncio.AbstractEventLoop, pid: int, stdin: int, stdout: int, stderr: int, row: bytes) -> None:
        self.loop = loop
        self.pid = pid
        self.output = AgentOutput()
        #: The launcher's ends of stdout and stderr still open, by the stream they read.
        self.reading = {stdout: 1, stderr: 2}
        self.status: Optional[os.waitid_result] = None
        self.done = loop.create_future()
        self.drain: Optional[asyncio.TimerHandle] = None
        for fd in self.reading:
            loop.add_reader(fd, self.read, fd)
        self.stdin: Optional[int] = stdin
        self.unwritten = memoryview(row)
        self.write_row()

    def write_row(self) -> None:
        assert self.stdin is not None
        try:
            while self.unwritten:
                self.unwritten = self.unwritten[os.write(self.stdin, self.unwritten):]
        except BlockingIOError:  # the pipe is full: more when the agent has read some
            self.loop.add_writer(self.stdin, self.write_row)
            return
        except OSError:  # it closed its stdin (EPIPE): an agent need not read its row
            pass
        self.close_stdin()

    def close_stdin(self) -> None:
        if self.stdin is not None:
            self.loop.remove_writer(self.stdin)
            os.close(self.stdin)
            self.stdin = None

    def read(self, fd: int) -> None:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.output.data(self.reading[fd], data)
        else:
            self.stop_reading(fd)
            self.settle()

    def stop_reading(self, fd: int) -> None:
        self.loop.remove_reader(fd)
        os.close(fd)
        self.output.end(self.reading.pop(fd))

    def exited(self, status: os.waitid_result) -> None:
        """Reaped (its process group killed first): done once its pipes have closed, or DRAIN_S from now."""
        self.status = status
        self.close_stdin()
        if self.reading:
            self.drain = self.loop.call_later(DRAIN_S, self.give_up_reading)
        self.settle()

    def give_up_reading(self) -> None:
        for fd in list(self.reading):
            self.stop_reading(fd)
        self.settle()

    def settle(self) -> None:
        if self.status is None or self.reading or self.done.done():
            return
        if self.drain is not None:
            self.drain.cancel()
        self.done.set_result(None)

    def reply(self) -> dict[str, Any]:
        assert self.status is not None
        exited = self.status.si_code == os.CLD_EXITED
        last = self.output.last_line.decode("utf-8", "replace").strip() if self.output.last_line is not None else None
        return {
            "ok": True,
            "last_line": last or None,
            "code": self.status.si_status if exited else None,
            "signal": None if exited else signal.Signals(self.status.si_status).name,
            "stderr_tail": [line.decode("utf-8", "replace") for line in self.output.stderr_tail],
        }


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # gone already
        pass


def find_program(program: str, env: dict[str, str]) -> str:
    """argv[0] as execvp finds it, on the agent's PATH (posix_spawnp would search the launcher's)."""
    if "/" in program:
        return program
    denied = None
    for folder in env.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", program)
        if os.path.isfile(path):
            if os.access(path, os.X_OK):
                return path
            denied = denied or path
    code = errno.EACCES if denied else errno.ENOENT
    raise OSError(code, os.strerror(code), program)


def spawn_error(exc: OSError, program: str) -> str:
    """`No such file or directory (ENOENT)`, and the path when it is not the program (a missing working folder)."""
    code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    where = f": {exc.filename}" if exc.filename not in (None, program) else ""
    return f"{exc.strerror} ({code}){where}"


def raise_open_files_limit() -> None:
    """Three descriptors per agent: lift the soft limit to the hard one, as Node does for itself (the agents inherit
    it, as they did from the CLI)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class AgentLauncher(TaskHost):
    cancelled_text = "the agent was cancelled at the trajectory's deadline before it started"

    def __init__(self, _loaded: Any, replies: TextIO) -> None:
        super().__init__(replies)
        #: The agents running now, by pid.
        self.agents: dict[int, Agent] = {}
        self.home = os.getcwd()
        ORPHAN_HOOKS.append(self.kill_all)

    def kill_all(self) -> None:
        for pid in list(self.agents):
            kill_group(pid)

    async def serve(self, requests: TextIO) -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGCHLD, self.reap)
        await super().serve(requests)

    def reap(self) -> None:
        """Every agent that has exited: its process group is killed while its pid still holds the group's id (the
        agent not yet reaped, so the id cannot have been reused), then it is reaped."""
        while True:
            try:
                status = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if status is None:
                return
            kill_group(status.si_pid)
            os.waitpid(status.si_pid, 0)
            agent = self.agents.pop(status.si_pid, None)
            if agent is not None:
                agent.exited(status)

    def start(self, req: dict[str, Any]) -> Any:
        return self.run_request(req)

    async def run(self, req: dict[str, Any]) -> None:
        run_id = req.get("id")
        try:
            self.write({"id": run_id, **await self.launch(req)})
        finally:
            self.tasks.pop(run_id, None)

    async def launch(self, req: dict[str, Any]) -> dict[str, Any]:
        try:
            agent = self.spawn(req["argv"], req.get("env") or {}, req.get("cwd") or self.home, str(req.get("input", "")).encode())
        except OSError as exc:
            return {"ok": False, "kind": "spawn", "error": spawn_error(exc, req["argv"][0])}
        except (KeyError, IndexError, TypeError, ValueError) as exc:  # no argv, or not strings (a NUL byte)
            return {"ok": False, "kind": "spawn", "error": last_line(exc)}
        try:
            await asyncio.shield(agent.done)
        except asyncio.CancelledError:  # the deadline: SIGCHLD follows, and the reply says SIGKILL
            kill_group(agent.pid)
            await agent.done
        return agent.reply()

    def spawn(self, argv: list[str], env: dict[str, str], cwd: str, row: bytes) -> Agent:
        # posix_spawn has no working-folder argument (glibc's addchdir_np is not in Python): the launcher moves there
        # itself, so that a relative argv[0] or PATH entry is found from the agent's folder, as the CLI's spawn found it.
        os.chdir(cwd)
        program = find_program(argv[0], env)
        pipes = [os.pipe() for _ in range(3)]  # not inheritable: only the dup2'd ends reach the agent
        ours, theirs = [pipes[0][1], pipes[1][0], pipes[2][0]], [pipes[0][0], pipes[1][1], pipes[2][1]]
        try:
            pid = os.posix_spawn(
                program, argv, env, file_actions=[(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate(theirs)], setsid=True, setsigdef=RESET_SIGNALS,
            )
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        for fd in ours:
            os.set_blocking(fd, False)
        agent = Agent(asyncio.get_running_loop(), pid, *ours, row)
        self.agents[pid] = agent
        return agent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl_worker.agent_launcher")

    def load(_args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
        raise_open_files_limit()
        return True, {"ready": True, "name": "agent_launcher"}

    return host_main(parser, argv, load, AgentLauncher)


if __name__ == "__main__":
    sys.exit(main())
