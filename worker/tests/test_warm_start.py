"""The warm-start server forks a module's run in place of the process that was started, and that process stands in for
it: its streams, its exit status, its signals, its death, its parent."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentrl_worker import warm_start

WORKER_DIR = Path(__file__).resolve().parents[1]

# A module that hands off like the worker's entry points, then reports what it sees.
PROBE = """
from agentrl_worker.warm_start import hand_off
hand_off(__name__)
import json, os, sys, time
report = {"pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv[1:], "cwd": os.getcwd(),
          "marker": os.environ.get("PROBE_MARKER"), "stdin": sys.stdin.readline().strip(),
          "torch": "torch" in sys.modules}
print(json.dumps(report), flush=True)
print("to stderr", file=sys.stderr, flush=True)
if sys.argv[1:2] == ["sleep"]:
    time.sleep(60)
sys.exit(int(os.environ.get("PROBE_EXIT", "0")))
"""


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    package = tmp_path / "probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(PROBE)
    # A program that imports an entry point (as pytest imports agentrl_worker.__main__): not the one to hand off.
    importer = tmp_path / "importer"
    importer.mkdir()
    (importer / "__init__.py").write_text("")
    (importer / "__main__.py").write_text("import os, sys, probe.__main__\n")
    return tmp_path


def _env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != warm_start.SOCKET_VARIABLE}
    env["PYTHONPATH"] = str(WORKER_DIR)
    env.update(extra)
    return env


@pytest.fixture
def server(tmp_path: Path):
    socket_path = tmp_path / "warm.sock"
    # Light preloads: what is tested here is the hand-off, not the imports it saves.
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrl_worker.warm_start", "--socket", str(socket_path), "--preload", "json"],
        cwd=WORKER_DIR, env=_env(), stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 30
    while not socket_path.exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield socket_path, proc
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)


def _start(root: Path, socket_path: Path | None, *args: str, **env: str) -> subprocess.Popen:
    extra = {warm_start.SOCKET_VARIABLE: str(socket_path)} if socket_path else {}
    return subprocess.Popen(
        [sys.executable, "-m", "probe", *args], cwd=root, env=_env(**extra, **env),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _report(proc: subprocess.Popen, stdin: str = "hello\n") -> dict:
    proc.stdin.write(stdin)
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_forked_run_has_the_started_processs_argv_cwd_env_streams_parent_and_exit_status(probe, server) -> None:
    socket_path, _ = server
    proc = _start(probe, socket_path, "a", "b c", PROBE_MARKER="m-1", PROBE_EXIT="3")
    report = _report(proc)
    out, err = proc.communicate(timeout=30)
    assert report["pid"] != proc.pid  # forked by the server, not run by the process that was started
    assert report["ppid"] == os.getpid()  # ... yet its parent is the stand-in's
    assert report["argv"] == ["a", "b c"]
    assert report["cwd"] == str(probe)
    assert report["marker"] == "m-1"
    assert report["stdin"] == "hello"
    assert err.strip() == "to stderr"
    assert proc.returncode == 3


def test_without_the_variable_the_module_runs_in_the_started_process(probe) -> None:
    proc = _start(probe, None)
    report = _report(proc)
    proc.communicate(timeout=30)
    assert report["pid"] == proc.pid and proc.returncode == 0


def test_a_program_that_imports_an_entry_point_is_not_handed_off(probe, server) -> None:
    socket_path, server_proc = server
    proc = subprocess.Popen(
        [sys.executable, "-m", "importer"], cwd=probe, env=_env(**{warm_start.SOCKET_VARIABLE: str(socket_path)}),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    report = _report(proc)
    proc.communicate(timeout=30)
    assert report["pid"] == proc.pid and proc.returncode == 0
    server_proc.send_signal(signal.SIGTERM)
    server_proc.wait(timeout=20)
    assert "0 processes forked, 0 started cold" in server_proc.stderr.read()


def test_a_different_import_time_environment_starts_cold_and_is_counted(probe, server) -> None:
    socket_path, server_proc = server
    proc = _start(probe, socket_path, HF_HOME=str(probe / "elsewhere"))
    report = _report(proc)
    proc.communicate(timeout=30)
    assert report["pid"] == proc.pid and proc.returncode == 0
    server_proc.send_signal(signal.SIGTERM)
    server_proc.wait(timeout=20)
    summary = server_proc.stderr.read()
    assert "0 processes forked, 1 started cold (import-time variables differ: HF_HOME: 1)" in summary


def test_a_signal_to_the_stand_in_reaches_the_run_and_the_stand_in_dies_of_it(probe, server) -> None:
    socket_path, _ = server
    proc = _start(probe, socket_path, "sleep")
    child = _report(proc)["pid"]
    assert child != proc.pid
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM
    assert _gone(child)


def test_killing_the_stand_in_kills_the_runs_process_group(probe, server) -> None:
    socket_path, _ = server
    proc = _start(probe, socket_path, "sleep")
    child = _report(proc)["pid"]
    proc.kill()
    proc.wait(timeout=30)
    assert _gone(child)


def test_a_run_killed_by_a_signal_ends_its_stand_in_with_that_signal(probe, server) -> None:
    socket_path, _ = server
    proc = _start(probe, socket_path, "sleep")
    child = _report(proc)["pid"]
    os.kill(child, signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, err


def test_a_stand_in_gone_before_its_answer_takes_its_child_along_and_the_server_serves_on(probe, server) -> None:
    socket_path, server_proc = server
    request = {
        "module": "probe", "argv": ["probe", "sleep"], "env": _env(), "cwd": str(probe), "path": [str(probe), *sys.path],
        "umask": 0o22, "parent": os.getpid(), "interpreter": warm_start.interpreter(),
        "streams": {"stdout": [False, False], "stderr": [True, False]},
    }
    reader, writer = os.pipe()
    stdin, stdin_writer = os.pipe()
    os.close(stdin_writer)  # the child reads an empty stdin
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(socket_path))
    socket.send_fds(conn, [json.dumps(request).encode() + b"\n"], [stdin, writer, writer])
    conn.close()  # gone before the server answers
    os.close(writer)
    os.close(stdin)
    # The child held the pipe's only other write end: end of file on it means the child is gone (it would sleep 60 s).
    import select

    try:
        assert select.select([reader], [], [], 20)[0] == [reader]
        while os.read(reader, 4096):
            pass
    finally:
        os.close(reader)
    # The server is still there for the next process.
    proc = _start(probe, socket_path)
    report = _report(proc)
    proc.communicate(timeout=30)
    assert report["pid"] != proc.pid and proc.returncode == 0
    assert server_proc.poll() is None


def test_mismatch_names_what_differs() -> None:
    request = {"interpreter": warm_start.interpreter(), "env": {"HOME": "/a", "TORCH_X": "1", "UNRELATED": "x",
                                                               "OMP_NUM_THREADS": "1", "PYTHONPATH": "/p"}}
    assert warm_start.mismatch(request, {"HOME": "/a", "TORCH_X": "1", "OMP_NUM_THREADS": "4"}) is None
    assert warm_start.mismatch(request, {"HOME": "/b", "TORCH_X": "1"}) == "import-time variables differ: HOME"
    assert warm_start.mismatch(request, {"HOME": "/a"}) == "import-time variables differ: TORCH_X"
    # What torchrun sets for each rank is read when torch.distributed starts: a rank still forks.
    ranked = {**request, "env": {**request["env"], "TORCHELASTIC_RUN_ID": "r1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3"}}
    assert warm_start.mismatch(ranked, {"HOME": "/a", "TORCH_X": "1"}) is None
    other = {**request, "interpreter": {**warm_start.interpreter(), "package": "/elsewhere/agentrl_worker"}}
    assert "package differs" in warm_start.mismatch(other, {"HOME": "/a", "TORCH_X": "1"})


@pytest.mark.parametrize("module", ["agentrl_worker/__main__.py", "agentrl_worker/embedded_server/__main__.py",
                                    "agentrl_worker/make_tiny.py", "agentrl_worker/export_lora.py"])
def test_the_programs_that_import_torch_hand_off_before_anything_else(module: str) -> None:
    import ast

    body = ast.parse((WORKER_DIR / module).read_text()).body
    statements = [node for node in body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    statements = [node for node in statements if not (isinstance(node, ast.ImportFrom) and node.module == "__future__")]
    first, second = statements[0], statements[1]
    assert isinstance(first, ast.ImportFrom) and first.module == "warm_start" and first.names[0].name == "hand_off"
    assert isinstance(second, ast.Expr) and ast.unparse(second) == "hand_off(__name__)"


def test_importing_the_packages_on_the_way_to_the_entry_points_does_not_import_torch() -> None:
    probe = "import sys, agentrl_worker.embedded_server, agentrl_worker.warm_start; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=WORKER_DIR, env=_env(), capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
