"""What starting one worker rank costs, with torchrun around it and without (as the CLI now starts one rank).

    .venv/bin/python bench/worker_startup.py [--repeats 4]

Each launch runs to the worker's ready event on its socket (torch imported, process group formed), then shuts down.
The two kinds alternate, so both see the same machine load; the medians and their ratio are printed. Model loading
(`init`) comes after ready and is the same either way: bench/worker_step.py measures it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "worker"))
sys.path.insert(0, str(ROOT / "worker" / "tests"))

from worker_harness import WorkerProcess  # noqa: E402


def launch_to_ready(work: Path, torchrun: bool) -> float:
    start = time.perf_counter()
    worker = WorkerProcess(1, work, torchrun=torchrun)
    try:
        ready = time.perf_counter() - start
        assert worker.ready["world_size"] == 1, worker.ready
        worker.ok("shutdown")
        worker.proc.wait(timeout=60)
    finally:
        worker.close()
    return ready


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    times: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="agentrl-bench-") as work:
        for _ in range(args.repeats):
            for torchrun in (True, False):
                times[torchrun].append(launch_to_ready(Path(work), torchrun))
    under, alone = statistics.median(times[True]), statistics.median(times[False])
    print(f"one rank, launch -> ready, median of {args.repeats}:")
    print(f"  under torchrun --standalone:  {under:6.2f} s  {[round(t, 2) for t in times[True]]}")
    print(f"  alone (the CLI's way):        {alone:6.2f} s  {[round(t, 2) for t in times[False]]}")
    print(f"  torchrun / alone:             {under / alone:6.2f}x  ({under - alone:.2f} s saved per start)")


if __name__ == "__main__":
    main()
