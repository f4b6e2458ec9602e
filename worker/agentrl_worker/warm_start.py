"""Warm starts: a process that has already imported torch and transformers forks the worker's ranks and the embedded
engine, instead of each paying the imports again.

On a small CPU machine those imports cost 6-12 s of CPU a process (torch, then transformers' modelling code, which
pulls in torch._dynamo and torch.distributed.tensor), and the test suite starts a hundred such processes. With
AGENTRL_WARM_START set to the socket of a running server (`python -m agentrl_worker.warm_start --socket PATH`), an
entry point that calls `hand_off()` before its imports sends the server its argv, environment, working directory,
search path and standard streams (the file descriptors themselves, over the Unix socket), and the server forks a
child that runs the module with them. The process that was started stays as the child's stand-in, so whoever
started it sees what it would have seen:
- the child writes to the stand-in's stdin, stdout and stderr;
- a signal to the stand-in (or its process group) goes on to the child's process group;
- the stand-in exits with the child's status, or dies of the child's signal;
- when the stand-in dies (SIGKILL included), the server kills the child's process group;
- `os.getppid()` in the child answers for the stand-in: the stand-in's parent, or 1 once it is gone, which is what
  the hosts' --parent-pid watch reads.

Everything the environment decides at import time must be the server's: a request whose import-time variables
(HF_*, TORCH*, PYTHON*, MALLOC_*, HOME, locale ...) or interpreter differ is answered "run it yourself", and the
process carries on as a cold start. Without AGENTRL_WARM_START, `hand_off()` returns at once. Linux only (fork, and
/proc for the stand-in's parent).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import socket
import sys
from typing import Any

SOCKET_VARIABLE = "AGENTRL_WARM_START"
_FORKED = False  # True in a child the server forked: it runs its module, it does not hand it off again

# Variables read while torch, transformers, huggingface_hub, glibc's malloc or the interpreter start: a child can
# only be forked from a server that started with the same values. The thread counts are not among them: the child
# sets its pools from them (torch sizes them lazily).
IMPORT_TIME_PREFIXES = (
    "HF_", "HUGGINGFACE", "TRANSFORMERS_", "TORCH", "PYTORCH_", "CUDA", "NVIDIA_", "NCCL_", "TOKENIZERS_",
    "SAFETENSORS_", "LD_", "XDG_", "MALLOC_", "KMP_", "GOMP_", "PYTHON", "LC_",
)
IMPORT_TIME_NAMES = ("HOME", "LANG")
# Read by the child itself, or by the stand-in's own start.
CHILD_SET = ("PYTHONPATH", "PYTHONUNBUFFERED", "OMP_NUM_THREADS", "MKL_NUM_THREADS", SOCKET_VARIABLE)
# What torchrun gives each rank, read when torch.distributed starts, not on import.
RUN_TIME_PREFIXES = ("TORCHELASTIC_", "TORCH_NCCL_")


def import_time_env(env: dict[str, str]) -> dict[str, str]:
    """The part of `env` that must equal the server's for a fork to behave like a fresh start."""
    return {
        key: value for key, value in env.items()
        if key not in CHILD_SET and not key.startswith(RUN_TIME_PREFIXES)
        and (key.startswith(IMPORT_TIME_PREFIXES) or key in IMPORT_TIME_NAMES)
    }


def interpreter() -> dict[str, Any]:
    """What identifies the interpreter and the agentrl_worker package a fork would run."""
    return {
        "prefix": sys.prefix,
        "version": sys.version,
        "package": os.path.dirname(os.path.abspath(__file__)),
        "flags": list(sys.flags),
        "warnoptions": sys.warnoptions,
        "xoptions": {key: str(value) for key, value in sys._xoptions.items()},
    }


def mismatch(request: dict[str, Any], server_env: dict[str, str]) -> str | None:
    """Why a request cannot be forked from this server, or None."""
    ours, theirs = interpreter(), request["interpreter"]
    for key, value in ours.items():
        if theirs.get(key) != value:
            return f"{key} differs: {theirs.get(key)!r} here, {value!r} in the server"
    wanted, have = import_time_env(request["env"]), import_time_env(server_env)
    differing = sorted(key for key in wanted.keys() | have.keys() if wanted.get(key) != have.get(key))
    if differing:
        return "import-time variables differ: " + ", ".join(differing)
    return None


# --- the stand-in ---------------------------------------------------------------------------------------------------


def hand_off(caller: str) -> None:
    """Runs this process's module in a child of the warm-start server and exits as the child does. An entry point
    calls it with its `__name__`: it acts only for the module the process was started to run (`__main__`), never
    for a process that imports the entry point (a test importing agentrl_worker.__main__ under pytest). Returns at
    once without AGENTRL_WARM_START, and when the server cannot take the process (which then starts cold)."""
    path = os.environ.get(SOCKET_VARIABLE)
    if caller != "__main__" or not path or _FORKED or not sys.platform.startswith("linux"):
        return
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    if spec is None:
        return
    module = spec.name.removesuffix(".__main__")
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        request = {
            "module": module, "argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd(), "path": sys.path,
            "umask": _umask(), "parent": os.getpid(), "interpreter": interpreter(), "streams": _streams(),
        }
        socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
        reader = conn.makefile("rb")
        reply = json.loads(reader.readline() or b"{}")
    except (OSError, ValueError):
        conn.close()
        return
    if "pid" not in reply:
        conn.close()
        return
    _stand_in(int(reply["pid"]), reader)


def _streams() -> dict[str, list[bool]]:
    """stdout's and stderr's buffering (-u and PYTHONUNBUFFERED set it, and whether each is a terminal)."""
    return {
        name: [stream.line_buffering, stream.write_through]
        for name, stream in (("stdout", sys.stdout), ("stderr", sys.stderr)) if stream is not None
    }


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


def _stand_in(child: int, reader: Any) -> None:
    """Forwards signals to the child's group until the server reports its end, then ends the same way."""

    def forward(signum: int, _frame: Any) -> None:
        try:
            os.killpg(child, signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED:
        signal.signal(signum, forward)
    line = reader.readline()  # retried across the forwarded signals (PEP 475)
    if not line:  # the server is gone: so must its child be
        _kill_group(child)
        print("warm start: the server went away while it ran this process", file=sys.stderr, flush=True)
    end = json.loads(line) if line else {"exit": 1}
    sys.stdout.flush()
    sys.stderr.flush()
    if "signal" in end:
        if end["signal"] not in (signal.SIGKILL, signal.SIGSTOP):  # those two have no handler to reset
            signal.signal(end["signal"], signal.SIG_DFL)
        os.kill(os.getpid(), end["signal"])
    os._exit(end.get("exit", 1))


# --- the server -----------------------------------------------------------------------------------------------------


# What the worker's ranks and the engine import before they do anything: the expensive part of their start.
PRELOAD = (
    "torch", "torch.distributed", "transformers", "transformers.models.auto.modeling_auto",
    "transformers.models.auto.tokenization_auto", "transformers.models.qwen2.modeling_qwen2",
    "transformers.models.qwen3.modeling_qwen3", "agentrl_worker.trainer", "agentrl_worker.embedded_server.server",
)


def preload(modules: list[str]) -> None:
    import importlib

    for module in modules:
        importlib.import_module(module)


def serve(path: str, parent: int | None, server_env: dict[str, str]) -> None:
    """Accepts requests on `path` until SIGTERM, or until `parent` is gone. `server_env` is the environment the server
    started with (the imports add to os.environ: torch sets TORCHINDUCTOR_CACHE_DIR)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    os.rename(path + ".tmp", path)  # ready once the path exists
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_read, selectors.EVENT_READ, "wake")
    server = _Server(listener, selector, server_env, (wake_read, wake_write))
    try:
        while not stopping and (parent is None or os.getppid() == parent):
            for key, _ in selector.select(timeout=1.0):
                if key.data == "accept":
                    server.accept()
                elif key.data == "wake":
                    os.read(wake_read, 4096)
                    server.reap()
                else:
                    server.stand_in_readable(key.fileobj, key.data)
    finally:
        for child in list(server.children):
            _kill_group(child)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        print(server.summary(), file=sys.stderr, flush=True)


def _kill_group(pid: int) -> None:
    """Kills a forked child and its process group. The child itself too: until its setsid() there is no group of
    that id, and a child killed moments after its fork is in its parent's group still."""
    for kill in (os.kill, os.killpg):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class _Server:
    def __init__(self, listener: socket.socket, selector: selectors.BaseSelector, env: dict[str, str],
                 wake: tuple[int, int]) -> None:
        self.listener, self.selector, self.env, self.wake = listener, selector, env, wake
        # Each forked child's stand-in connection; None once the stand-in is gone and the child is being killed.
        self.children: dict[int, socket.socket | None] = {}
        self.forks = 0
        self.refusals: dict[str, int] = {}

    def summary(self) -> str:
        """`warm start: 41 processes forked, 3 started cold (import-time variables differ: HF_HOME: 3)`."""
        cold = sum(self.refusals.values())
        reasons = "; ".join(f"{reason}: {count}" for reason, count in sorted(self.refusals.items()))
        return f"warm start: {self.forks} processes forked, {cold} started cold" + (f" ({reasons})" if reasons else "")

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        try:
            request, fds = _read_request(conn)
        except (OSError, ValueError) as err:
            conn.close()
            print(f"warm start: a bad request ({err})", file=sys.stderr, flush=True)
            return
        reason = "a forked child handing off again" if request.get("parent") in self.children else mismatch(request, self.env)
        if reason is not None:
            self.refusals[reason] = self.refusals.get(reason, 0) + 1
            for fd in fds:
                os.close(fd)
            try:
                _send(conn, {"refused": reason})
            except OSError:
                pass  # the stand-in is gone: nothing to tell
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            self._become(request, fds, conn)  # never returns
        for fd in fds:
            os.close(fd)
        self.forks += 1
        try:
            _send(conn, {"pid": pid})
        except OSError:  # the stand-in died before its answer: so does its child (reap() collects it)
            conn.close()
            self.children[pid] = None
            _kill_group(pid)
            return
        self.children[pid] = conn
        self.selector.register(conn, selectors.EVENT_READ, pid)

    def stand_in_readable(self, conn: socket.socket, pid: int) -> None:
        """The stand-in's end closed (it died, SIGKILL included): its child goes too."""
        try:
            if conn.recv(1):
                return
        except OSError:
            pass
        self.selector.unregister(conn)
        conn.close()
        if self.children.get(pid) is conn:
            self.children[pid] = None
            _kill_group(pid)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            end = {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else {"exit": os.waitstatus_to_exitcode(status)}
            try:
                _send(conn, end)
            except OSError:
                pass
            self.selector.unregister(conn)
            conn.close()

    def _become(self, request: dict[str, Any], fds: list[int], conn: socket.socket) -> None:
        """In the forked child: take on the stand-in's process state, then run its module as `python -m` would."""
        try:
            os.setsid()
            signal.set_wakeup_fd(-1)
            for signum in (signal.SIGCHLD, signal.SIGTERM, *FORWARDED):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            self.selector.close()
            for sock in (self.listener, conn, *(c for c in self.children.values() if c is not None)):
                sock.close()
            for fd in self.wake:
                os.close(fd)
            _take_process_state(request, fds)
        except BaseException:  # noqa: BLE001 - the child must never return into the server's loop
            import traceback

            traceback.print_exc()
            os._exit(70)
        code = _run_module(request["module"])
        if code == -signal.SIGINT:  # an uncaught KeyboardInterrupt: the interpreter dies of SIGINT
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code)


def _read_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    conn.settimeout(10.0)
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    while not data.endswith(b"\n"):
        more = conn.recv(1 << 16)
        if not more:
            for fd in fds:
                os.close(fd)
            raise ValueError("the request ended early")
        data += more
    conn.settimeout(None)
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"{len(fds)} file descriptors, not 3")
    return json.loads(data), fds


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _take_process_state(request: dict[str, Any], fds: list[int]) -> None:
    global _FORKED
    _FORKED = True
    for n, fd in enumerate(fds):
        os.dup2(fd, n)
        os.close(fd)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[:] = request["path"]
    sys.argv[:] = request["argv"]
    for name, (line_buffering, write_through) in request["streams"].items():
        getattr(sys, name).reconfigure(line_buffering=line_buffering, write_through=write_through)
    _fresh_randomness()
    _thread_pools()
    stand_in = request["parent"]
    os.getppid = lambda: _parent_of(stand_in)  # the --parent-pid watches look through the stand-in


def _fresh_randomness() -> None:
    """A fresh process seeds these from the OS; a fork would share the server's state with every sibling."""
    import random
    import tempfile

    random.seed()
    tempfile.tempdir = None
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _thread_pools() -> None:
    torch = sys.modules.get("torch")
    if torch is None:
        return
    threads = os.environ.get("OMP_NUM_THREADS") or os.environ.get("MKL_NUM_THREADS")
    if threads and threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))


def _parent_of(pid: int) -> int:
    """The parent of process `pid`, or 1 (init) once it is gone, as getppid() reads after a re-parenting."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return 1 if fields[0] in (b"Z", b"X") else int(fields[1])
    except (OSError, IndexError, ValueError):
        return 1


def _run_module(module: str) -> int:
    """Runs `module` as __main__ and returns its exit status (-SIGINT for an uncaught KeyboardInterrupt), ending the
    way an interpreter does: non-daemon threads joined, atexit handlers run, streams flushed."""
    import atexit
    import runpy
    import threading
    import traceback

    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = _exit_status(exit_.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:  # noqa: BLE001 - reported like an uncaught exception
        traceback.print_exc()
        code = 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
    return code


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agentrl_worker.warm_start", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--socket", required=True, help="Unix socket path to listen on (it appears once ready)")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    parser.add_argument("--preload", default=",".join(PRELOAD),
                        help="comma-separated modules to import before serving (default: torch, transformers and the "
                             "worker's and engine's modules)")
    args = parser.parse_args(argv)
    os.environ.pop(SOCKET_VARIABLE, None)
    started_with = dict(os.environ)
    preload([module for module in args.preload.split(",") if module])
    serve(args.socket, args.parent_pid, started_with)


if __name__ == "__main__":
    # Run as the package's module, not as __main__: a forked child's hand_off() must see the _FORKED this sets.
    from agentrl_worker.warm_start import main as package_main

    package_main()
