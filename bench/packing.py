"""Compute saved by packed micro-batches (use_remove_padding) on a multi-turn length mix, measured side by side.

    .venv/bin/python bench/packing.py [--rows 16] [--median 500] [--sigma 0.7] [--budget 4096] [--repeats 3]

Sequence lengths are lognormal (median --median, shape --sigma, clipped to 64..4096), as agent trajectories are: most
short, a long tail of many-turn ones. Each row is a prompt then alternating sampled and tool/user chunks. The batch is
planned into micro-batches within --budget tokens both ways; the padded plan counts rows x longest row per micro-batch,
the packed one the rows' tokens. Then one in-process rank (FSDP2 on the CPU, float32) runs `sft_step` (forward,
backward, optimizer step) on a tiny random Qwen3 model, packed and padded alternately, and the median times are
compared. The model is tiny (its 151,936-token lm_head outweighs its layers), so the time ratio is the CPU's for this
model; in a large model the layers dominate and scale with the token counts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "worker"))
sys.path.insert(0, str(ROOT / "worker" / "tests"))

from agentrl_worker.batch import plan_micro_batches  # noqa: E402
from agentrl_worker.config import WorkerConfig  # noqa: E402
from agentrl_worker.make_tiny import make_tiny  # noqa: E402
from agentrl_worker.trainer import Trainer  # noqa: E402
from worker_harness import TOKENIZER_DIR, cpu_rank  # noqa: E402


HEADING = """## packing.py: packed micro-batches (use_remove_padding) vs padded, on a multi-turn length mix

Lognormal sequence lengths, planned into micro-batches by the worker's token budget both ways (the padded planner sorts
rows by length, so its padding is already less than padding every row to the batch's longest), then `sft_step`
(forward, backward, AdamW) on one CPU rank, packed and padded alternately, median times. The model is tiny, so its
151,936-token lm_head weighs more than its layers; in a large model the layers dominate and scale with the tokens.
"""


def lognormal_batch(rows: int, median: float, sigma: float, seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    lengths = (median * torch.exp(sigma * torch.randn(rows, generator=gen))).round().clamp(64, 4096).long().tolist()
    width = max(lengths)
    input_ids = torch.zeros(rows, width, dtype=torch.int64)
    attention = torch.zeros_like(input_ids)
    response = torch.zeros_like(input_ids)
    for i, n in enumerate(lengths):
        input_ids[i, :n] = torch.randint(0, 151643, (n,), generator=gen)
        attention[i, :n] = 1
        prompt = min(n // 3, 200)
        turn = torch.arange(n - prompt) // 96  # 96-token chunks: sampled, tool response, sampled, ...
        response[i, prompt:n] = (turn % 2 == 0).long()
    return {"input_ids": input_ids, "attention_mask": attention, "response_mask": response}


def planned_tokens(lengths: list[int], budget: int, packed: bool) -> tuple[int, int]:
    """(tokens the forward runs, micro-batches) of the worker's plan on one rank."""
    bins = plan_micro_batches(list(range(len(lengths))), lengths, 1, budget, packed=packed).per_rank[0]
    if packed:
        return sum(lengths), len(bins)
    return sum(len(b) * max(lengths[r] for r in b) for b in bins), len(bins)


def print_plan(lengths: list[int], budget: int) -> None:
    padded_tokens, padded_bins = planned_tokens(lengths, budget, packed=False)
    packed_tokens, packed_bins = planned_tokens(lengths, budget, packed=True)
    print(f"budget {budget} tokens per micro-batch")
    print(f"  padded: {padded_tokens} tokens in {padded_bins} micro-batches")
    print(f"  packed: {packed_tokens} tokens in {packed_bins} micro-batches")
    print(f"  padding share of the padded forward: {1 - packed_tokens / padded_tokens:.1%}; tokens padded/packed {padded_tokens / packed_tokens:.2f}")
    # For scale: a trainer that pads every row to the batch's longest (a fixed micro-batch size without sorting).
    print(f"  every row padded to the batch's longest: {len(lengths) * max(lengths)} tokens, "
          f"{len(lengths) * max(lengths) / packed_tokens:.2f} x packed")


def print_large_plans(median: float) -> None:
    """Token counts only (no model run) at a GPU-sized batch."""
    print("plans only, 512 rows per GPU (verl's 256 prompts x 16 samples over 8 GPUs), budget 16384 (the default):")
    for sigma in (0.5, 0.7, 1.0):
        big = lognormal_batch(512, median, sigma, seed=1)["attention_mask"].sum(-1).tolist()
        (pad, pad_bins), (pack, pack_bins) = planned_tokens(big, 16384, False), planned_tokens(big, 16384, True)
        print(f"  sigma {sigma}: padded {pad} tokens in {pad_bins} micro-batches, packed {pack} in {pack_bins}: "
              f"padded/packed {pad / pack:.2f}, vs all padded to the longest {512 * max(big) / pack:.2f}")


def time_steps(batch: dict[str, torch.Tensor], args: argparse.Namespace) -> dict[bool, tuple[list[float], list[float]]]:
    """(seconds, losses) of `sft_step` per repeat, packed (True) and padded (False) alternately."""
    with tempfile.TemporaryDirectory(prefix="agentrl-packing-") as tmp:
        root = Path(tmp)
        model = make_tiny(TOKENIZER_DIR, layers=args.layers, hidden=args.hidden, out=root / "tiny", seed=0)
        save_file(batch, str(root / "batch.safetensors"))
        with cpu_rank(root):
            trainers = {
                packed: Trainer(WorkerConfig.from_dict({"model_path": str(model), "lr": 1e-4,
                                                       "micro_batch_token_budget": args.budget, "use_remove_padding": packed}))
                for packed in (True, False)
            }
            results: dict[bool, tuple[list[float], list[float]]] = {True: ([], []), False: ([], [])}
            for _ in range(args.repeats):
                for packed, trainer in trainers.items():
                    start = time.perf_counter()
                    reply = trainer.sft_step(str(root / "batch.safetensors"))
                    results[packed][0].append(time.perf_counter() - start)
                    results[packed][1].append(reply["metrics"]["sft/loss"])
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--median", type=float, default=500)
    parser.add_argument("--sigma", type=float, default=0.7)
    parser.add_argument("--budget", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()

    batch = lognormal_batch(args.rows, args.median, args.sigma)
    lengths = batch["attention_mask"].sum(-1).tolist()
    print(HEADING)
    print("```")
    print(f"{args.rows} rows, lengths lognormal(median {args.median:.0f}, sigma {args.sigma}): "
          f"min {min(lengths)}, median {int(statistics.median(lengths))}, max {max(lengths)}, total {sum(lengths)}")
    print_plan(lengths, args.budget)
    results = time_steps(batch, args)
    packed_s, padded_s = statistics.median(results[True][0]), statistics.median(results[False][0])
    print(f"sft_step on a tiny Qwen3 ({args.layers} layers, hidden {args.hidden}), CPU, 1 thread, median of {args.repeats}:")
    print(f"  padded {padded_s:.2f} s, packed {packed_s:.2f} s: time padded/packed {padded_s / packed_s:.2f}")
    print(f"  first-step loss padded {results[False][1][0]:.6f}, packed {results[True][1][0]:.6f}")
    print_large_plans(args.median)
    print("```")


if __name__ == "__main__":
    main()
