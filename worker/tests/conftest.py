"""Fixtures that several test modules use, built once per pytest session instead of once per module."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

WORKER_DIR = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def warm_start():
    """A warm-start server for the session (agentrl_worker/warm_start.py): the worker ranks and engines these tests
    start as subprocesses are forked from one process that imported torch and transformers once, instead of each
    importing them again (6-12 s of CPU each). Processes whose import-time environment differs start cold, as they
    would without it. AGENTRL_SUITE_COLD=1 turns it off."""
    if os.environ.get("AGENTRL_SUITE_COLD") == "1" or not sys.platform.startswith("linux"):
        yield
        return
    # Outside tmp_path, which can be too long for an AF_UNIX path (~107 bytes).
    folder = tempfile.mkdtemp(prefix="agws-")
    socket_path = os.path.join(folder, "warm.sock")
    server = subprocess.Popen(
        [sys.executable, "-m", "agentrl_worker.warm_start", "--socket", socket_path, "--parent-pid", str(os.getpid())],
        cwd=WORKER_DIR, env={key: value for key, value in os.environ.items() if key != "AGENTRL_WARM_START"},
    )
    os.environ["AGENTRL_WARM_START"] = socket_path
    try:
        yield
    finally:
        os.environ.pop("AGENTRL_WARM_START", None)
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> tuple[Path, Path]:
    """The embedded engine's test models (test_embedded_server.py, test_prefix_cache.py): two checkpoints of the same
    architecture with different random weights (for the weight-update test), sharpened (test_embedded_server._sharpen).
    Nothing writes to them."""
    from agentrl_worker.make_tiny import make_tiny
    from test_embedded_server import TOKENIZER, _sharpen

    base = tmp_path_factory.mktemp("engine-models")
    a = make_tiny(TOKENIZER, layers=2, hidden=64, out=base / "a", seed=0, arch="qwen2")
    b = make_tiny(TOKENIZER, layers=2, hidden=64, out=base / "b", seed=1, arch="qwen2")
    return _sharpen(a), _sharpen(b)


@pytest.fixture(scope="session")
def update_gradient_files(tmp_path_factory) -> dict:
    """test_update_gradient.py's tiny model, batch and log-probs (build_files), for its `env` fixture, which
    test_lora.py and test_ref_model.py use too."""
    from test_update_gradient import build_files

    return build_files(tmp_path_factory.mktemp("update-gradient-files"))
