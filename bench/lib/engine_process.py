"""The embedded engine as the Python benches drive it: a child process on a free port, and JSON POSTs to it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def post(url: str, body: dict, timeout: float = 3600) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def start_engine(model: Path, *flags: str, worker_dir: Path = ROOT / "worker") -> tuple[subprocess.Popen, str]:
    """`python -m agentrl_worker.embedded_server --model MODEL --port 0 FLAGS...` from `worker_dir` (another checkout's
    worker/ runs that checkout's engine); returns the process and its URL."""
    proc = subprocess.Popen([sys.executable, "-m", "agentrl_worker.embedded_server", "--model", str(model), "--port", "0", *flags],
                            cwd=worker_dir, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    match = re.search(r"on (http://[\d.]+:\d+)", proc.stdout.readline())
    if not match:
        proc.kill()
        raise RuntimeError("the embedded engine did not start")
    return proc, match.group(1)
