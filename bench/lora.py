"""LoRA against full weights (issue 30), both measured in the same run: bytes and seconds per weight sync, the
trainer's peak memory, seconds per training step.

    .venv/bin/python bench/lora.py [--shapes demo,0.5b] [--rank 16] [--repeats 2]

Each variant runs the real code at both ends: a 1-rank worker (started and driven over its socket as the CLI does,
use_kl_loss on as in the demo and the GPU recipe) and an embedded engine process (with --enable-lora for LoRA).
- sync, full: `save_weights` + POST /update_weights_from_disk (the default method); LoRA: `save_adapter` + POST
  /load_lora_adapter, then /unload_lora_adapter of the previous one (what agentrl train does each step). Bytes: the
  safetensors file each writes. Median of the repeats.
- step: `compute_log_probs` (policy and reference) + `update` (one optimizer step) on a fixed random batch; the second
  of two steps (the first pays one-time allocations).
- peak memory: the worker process's peak resident set (VmHWM) after the steps: model, reference, gradients and AdamW
  state. With LoRA the reference is the policy with its adapter disabled, the base has no gradients and AdamW holds
  the adapter only.
Shapes: `demo` is the CPU demo's model (runs/cpu-demo-sft/model, else examples/cpu-demo/model); `0.5b` a random-init
Qwen2 of Qwen2.5-0.5B's shape (float32 master weights, the checkpoint in bfloat16 as Qwen ships it). Prints a markdown
table with the LoRA/full ratios and writes the rows as JSON lines to --out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "worker"), str(ROOT / "worker" / "tests"), str(ROOT / "bench" / "lib")]

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from agentrl_worker.make_tiny import make_tiny  # noqa: E402
from engine_process import post, start_engine  # noqa: E402
from worker_harness import TOKENIZER_DIR, WorkerProcess  # noqa: E402

# rows, prompt tokens, response tokens of the step batch
BATCH = {"demo": (16, 200, 24), "0.5b": (4, 96, 32)}


def model_for(shape: str, work: Path) -> Path:
    if shape == "demo":
        sft = ROOT / "runs" / "cpu-demo-sft" / "model"
        return sft if sft.exists() else ROOT / "examples" / "cpu-demo" / "model"
    model = make_tiny(TOKENIZER_DIR, 24, 896, work / "qwen0.5b", seed=0, arch="qwen2", heads=14, kv_heads=2, intermediate=4864, tie=True)
    config = json.loads((model / "config.json").read_text())
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(model, dtype=torch.bfloat16).save_pretrained(model)  # Qwen ships bfloat16
    assert json.loads((model / "config.json").read_text())["vocab_size"] == config["vocab_size"]
    return model


def write_batch(path: Path, vocab: int, rows: int, prompt: int, response: int) -> None:
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (rows, prompt + response), generator=gen)
    ids[:, :prompt] = ids[0, :prompt]  # one prompt per group of 4, as GRPO's
    mask = torch.zeros_like(ids)
    mask[:, prompt:] = 1
    save_file({
        "input_ids": ids, "attention_mask": torch.ones_like(ids), "response_mask": mask,
        "rewards": torch.tensor([float(i % 2) for i in range(rows)]), "group_ids": torch.arange(rows) // 4,
    }, str(path))


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_variant(shape: str, model: Path, work: Path, rank: int, repeats: int) -> dict:
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    rows, prompt, response = BATCH[shape]
    batch = work / f"{shape}-batch.safetensors"
    write_batch(batch, vocab, rows, prompt, response)
    engine, url = start_engine(model, *(["--enable-lora", "--max-lora-rank", str(rank)] if rank else []))
    worker = WorkerProcess(1, work)
    config = {"model_path": str(model), "lr": 1e-5, "use_ref": True, "use_kl_loss": True, "micro_batch_token_budget": 4096}
    if rank:
        config.update(lora_rank=rank, lora_alpha=2 * rank)
    try:
        worker.ok("init", config=config)
        steps = []
        for _ in range(2):
            started = time.perf_counter()
            worker.ok("compute_log_probs", batch=str(batch), out=str(work / "lp.safetensors"))
            worker.ok("update", batch=str(batch), log_probs=str(work / "lp.safetensors"))
            steps.append(time.perf_counter() - started)
        syncs, size, previous = [], 0, None
        for r in range(repeats):
            started = time.perf_counter()
            if rank:
                folder = work / "lora" / str(r)
                size = worker.ok("save_adapter", dir=str(folder))["bytes"]
                assert post(f"{url}/load_lora_adapter", {"lora_name": str(r), "lora_path": str(folder)})["success"]
                if previous is not None:
                    assert post(f"{url}/unload_lora_adapter", {"lora_name": previous})["success"]
                previous = str(r)
            else:
                folder = work / "weights"
                worker.ok("save_weights", dir=str(folder))
                assert post(f"{url}/update_weights_from_disk", {"model_path": str(folder), "weight_version": str(r)})["success"]
                size = (folder / "model.safetensors").stat().st_size
            syncs.append(time.perf_counter() - started)
        return {"shape": shape, "variant": f"lora r{rank}" if rank else "full", "sync_bytes": size,
                "sync_s": statistics.median(syncs), "step_s": steps[-1], "peak_mb": peak_rss_mb(worker.proc.pid)}
    finally:
        worker.close()
        engine.terminate()
        engine.wait(timeout=60)
        engine.stdout.close()
        shutil.rmtree(work / "lora", ignore_errors=True)
        shutil.rmtree(work / "weights", ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="demo,0.5b")
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=None, help="JSON lines of the rows")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="agentrl-lora-bench-") as tmp:
        work = Path(tmp)
        for shape in args.shapes.split(","):
            model = model_for(shape, work)
            full = run_variant(shape, model, work, 0, args.repeats)
            lora = run_variant(shape, model, work, args.rank, args.repeats)
            rows += [full, lora]
            print(json.dumps(full), json.dumps(lora), sep="\n", file=sys.stderr, flush=True)
    print("| shape | variant | sync bytes | sync s | step s | worker peak MB |\n|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['shape']} | {row['variant']} | {row['sync_bytes']:,} | {row['sync_s']:.3f} | {row['step_s']:.2f} | {row['peak_mb']:.0f} |")
    print("\n| shape | LoRA / full: sync bytes | sync s | step s | peak memory |\n|---|---|---|---|---|")
    for full, lora in zip(rows[::2], rows[1::2]):
        print(f"| {full['shape']} | {lora['sync_bytes'] / full['sync_bytes']:.4f} | {lora['sync_s'] / full['sync_s']:.3f} | "
              f"{lora['step_s'] / full['step_s']:.2f} | {lora['peak_mb'] / full['peak_mb']:.2f} |")
    if args.out:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))


if __name__ == "__main__":
    main()
