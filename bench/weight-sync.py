"""Disk against distributed weight sync, trainer to one embedded engine on this machine, from a tiny model to Qwen2.5-0.5B's
shapes (random init, float32).

    .venv/bin/python bench/weight-sync.py [--sizes tiny,small,medium,0.5b] [--repeats 2] [--bucket-mb 512]

Both paths run the real code at both ends: a 1-rank worker (started and driven over its socket as the CLI does) and
an embedded engine process. disk = `save_weights` + POST /update_weights_from_disk; distributed =
`plan_weight_buckets`, then per bucket POST /update_weights_from_distributed to the engine while the worker runs
`broadcast_weights` (gloo). Forming the group happens once per run and is reported on its own. Prints one row per
size (a markdown table, for docs/benchmarks.md) with both times, the median of the repeats, and the ratio
disk / distributed, measured in the same run.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "worker"))
sys.path.insert(0, str(ROOT / "worker" / "tests"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))

from agentrl_worker.make_tiny import make_tiny  # noqa: E402
from engine_process import post, start_engine  # noqa: E402
from worker_harness import TOKENIZER_DIR, WorkerProcess  # noqa: E402

# name: (hidden, layers, heads, kv_heads, intermediate, tied); "0.5b" is Qwen2.5-0.5B's shape.
SIZES = {
    "tiny": (64, 2, 4, 2, 128, False),
    "small": (256, 4, 4, 2, 1024, True),
    "medium": (512, 12, 8, 2, 2816, True),
    "0.5b": (896, 24, 14, 2, 4864, True),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def disk_sync(worker: WorkerProcess, url: str, folder: Path, version: str) -> float:
    started = time.perf_counter()
    worker.ok("save_weights", dir=str(folder))
    answer = post(f"{url}/update_weights_from_disk", {"model_path": str(folder), "weight_version": version})
    assert answer["success"], answer
    return time.perf_counter() - started


def distributed_sync(worker: WorkerProcess, url: str, bucket_bytes: int, version: str, pool: ThreadPoolExecutor) -> float:
    started = time.perf_counter()
    buckets = worker.ok("plan_weight_buckets", bucket_bytes=bucket_bytes)["buckets"]
    for i, bucket in enumerate(buckets):
        last = i == len(buckets) - 1
        body = {**bucket, "group_name": "weight_update_group", "flush_cache": last, **({"weight_version": version} if last else {})}
        announced = pool.submit(post, f"{url}/update_weights_from_distributed", body)
        worker.ok("broadcast_weights", names=bucket["names"])
        assert announced.result()["success"]
    return time.perf_counter() - started


def bench_size(name: str, work: Path, repeats: int, bucket_bytes: int) -> dict:
    hidden, layers, heads, kv, intermediate, tied = SIZES[name]
    model = make_tiny(TOKENIZER_DIR, layers, hidden, work / name, seed=0, arch="qwen2",
                      heads=heads, kv_heads=kv, intermediate=intermediate, tie=tied)
    engine, url = start_engine(model)
    worker = WorkerProcess(1, work)
    try:
        init = worker.ok("init", config={"model_path": str(model)})
        params = worker.ok("plan_weight_buckets", bucket_bytes=bucket_bytes)["buckets"]
        count = sum(_numel(shape) for bucket in params for shape in bucket["shapes"])
        with ThreadPoolExecutor(2) as pool:
            port = free_port()
            started = time.perf_counter()
            joined = pool.submit(post, f"{url}/init_weights_update_group", {
                "master_address": "127.0.0.1", "master_port": port, "rank_offset": 1, "world_size": 2, "backend": "gloo"})
            worker.ok("init_weights_group", master_address="127.0.0.1", master_port=port, world_size=2,
                      group_name="weight_update_group", backend="gloo", timeout_s=600)
            assert joined.result()["success"]
            group_s = time.perf_counter() - started
            disk, distributed = [], []
            for r in range(repeats):
                disk.append(disk_sync(worker, url, work / f"{name}-weights", f"d{r}"))
                distributed.append(distributed_sync(worker, url, bucket_bytes, f"n{r}", pool))
        shutil.rmtree(work / f"{name}-weights", ignore_errors=True)
        d, n = statistics.median(disk), statistics.median(distributed)
        return {"size": name, "params_m": count / 1e6, "buckets": len(params), "group_s": group_s, "disk_s": d,
                "distributed_s": n, "ratio": d / n, "load_s": init["load_s"]}
    finally:
        worker.close()
        engine.terminate()
        engine.wait(timeout=60)
        engine.stdout.close()
        shutil.rmtree(model, ignore_errors=True)


def _numel(shape: list[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="tiny,small,medium,0.5b")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--bucket-mb", type=int, default=512)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agentrl-bench-wsync-"))
    try:
        rows = [bench_size(name, work, args.repeats, args.bucket_mb * 1024 * 1024) for name in args.sizes.split(",")]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("## weight-sync.py: disk against distributed weight sync (CPU, gloo, float32)\n")
    print(f"One sync from a 1-rank worker to one embedded engine on the same machine, median of {args.repeats}. "
          "disk: save_weights + /update_weights_from_disk; distributed: plan_weight_buckets, then per bucket of "
          f"{args.bucket_mb} MB /update_weights_from_distributed while the worker runs broadcast_weights. "
          "Random-init Qwen2 shapes; 0.5b is Qwen2.5-0.5B's (tied embeddings). The group forms once per run (its column).\n")
    print("| size | parameters | buckets | group setup | disk | distributed | disk / distributed |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['size']} | {row['params_m']:.1f} M | {row['buckets']} | {row['group_s']:.2f} s | {row['disk_s']:.2f} s "
              f"| {row['distributed_s']:.2f} s | {row['ratio']:.2f}× |")


if __name__ == "__main__":
    main()
