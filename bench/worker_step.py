"""Worker throughput on CPU for a tiny Qwen3 model, and why the worker stays alive between steps.

    .venv/bin/python bench/worker_step.py [--nproc 2] [--steps 3] [--hidden 64] [--layers 2] [--prompts 4] [--samples 4]

Prints: start-up (launch to ready: torchrun for several ranks, the rank alone for one), init (model load + sharding),
per-step time of compute_log_probs + update, tokens/s, and the ratio (start-up + init) / step: how many training steps
one relaunch costs.
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

from agentrl_worker.make_tiny import make_tiny  # noqa: E402
from worker_harness import TOKENIZER_DIR, WorkerProcess, build_batch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--budget", type=int, default=1024)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="agentrl-bench-"))
    model = make_tiny(TOKENIZER_DIR, args.layers, args.hidden, work / "tiny", seed=0)
    batch = build_batch(work / "batch.safetensors", prompts=args.prompts, samples=args.samples)
    total_tokens = int(batch["attention_mask"].sum())
    response_tokens = int(batch["response_mask"].sum())

    t0 = time.perf_counter()
    worker = WorkerProcess(args.nproc, work)
    startup = time.perf_counter() - t0
    try:
        t1 = time.perf_counter()
        worker.ok("init", config={"model_path": str(model), "lr": 1e-4, "micro_batch_token_budget": args.budget})
        init = time.perf_counter() - t1
        steps = []
        for _ in range(args.steps):
            s = time.perf_counter()
            worker.ok("compute_log_probs", batch=str(work / "batch.safetensors"), out=str(work / "lp.safetensors"))
            worker.ok("update", batch=str(work / "batch.safetensors"), log_probs=str(work / "lp.safetensors"))
            steps.append(time.perf_counter() - s)
        worker.ok("shutdown")
    finally:
        worker.close()
    step = statistics.median(steps)
    print(f"model: Qwen3 hidden={args.hidden} layers={args.layers} vocab=151k; ranks={args.nproc} (gloo, FSDP2, CPU)")
    print(f"batch: {batch['input_ids'].shape[0]} rows, {total_tokens} tokens ({response_tokens} response tokens)")
    print(f"start-up (launch -> ready):        {startup:7.2f} s")
    print(f"init (load + shard model):         {init:7.2f} s")
    print(f"step (log-probs + update), median: {step:7.2f} s  over {args.steps} steps {[round(x, 2) for x in steps]}")
    print(f"throughput: {total_tokens / step:8.1f} tokens/s, {response_tokens / step:8.1f} response tokens/s")
    print(f"ratio (start-up + init) / step:    {(startup + init) / step:7.2f}  (steps' worth of time a relaunch per step would add)")


if __name__ == "__main__":
    main()
