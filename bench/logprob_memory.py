"""Peak CPU memory of log-probs + entropy over a 151,936-token vocabulary: the whole [tokens x vocab] logits at once
(the worker before chunking) against `algos.head_log_probs` in chunks, forward and backward as in a training step.

    .venv/bin/python bench/logprob_memory.py [--tokens 8192] [--vocab 151936] [--hidden 64] [--chunks 1024,2048]

Each variant runs in a fresh subprocess and reports its resident-set high-water mark (getrusage ru_maxrss) above the
mark reached once its inputs exist, so one variant's allocations never hide another's. A whole-logits variant that
would need more than half of the machine's available memory (predicted from the smaller token counts, which it scales
with linearly) is skipped and extrapolated, and the table says so.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "worker"))


HEADING = """## logprob_memory.py: log-probs and entropy over a 151,936-token vocabulary, whole logits vs chunks

Peak memory, forward and backward, float32 on the CPU: the whole `[tokens × vocab]` logits at once (the worker before
chunking) against `algos.head_log_probs` in chunks (`actor.logprob_chunk_tokens`, default 1024), each variant in its
own process (resident-set high-water mark above its inputs). The whole-logits peak grows linearly with the tokens; where
it would need more than half of the free memory it is extrapolated from the largest size run, not run. The chunked peak
is flat in the tokens. Chunks cost a second lm_head and log-softmax pass in the backward (times are one run each).
"""


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def _child(variant: str, tokens: int, vocab: int, hidden: int, chunk: int) -> None:
    import torch

    from agentrl_worker import algos

    torch.set_num_threads(1)  # a shared machine; memory, not speed, is measured
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(tokens, hidden, generator=gen).requires_grad_()
    w = (torch.randn(vocab, hidden, generator=gen) * 0.05).requires_grad_()
    labels = torch.randint(0, vocab, (tokens,), generator=gen)
    # Warm up both paths on a tiny input, so one-time set-up (checkpoint's first call) is in neither peak nor time.
    small = torch.randn(2, hidden).requires_grad_()
    algos.head_log_probs(small, small, torch.zeros(2, dtype=torch.long), chunk_tokens=1)[0].sum().backward()
    algos.log_probs_and_entropy(small @ small.T, torch.zeros(2, dtype=torch.long))[0].sum().backward()
    before = _peak_mb()
    start = time.perf_counter()
    if variant == "whole":
        lp, ent = algos.log_probs_and_entropy(torch.nn.functional.linear(h, w), labels)
    else:
        lp, ent = algos.head_log_probs(h, w, labels, chunk_tokens=chunk)
    (lp.sum() + 0.01 * ent.sum()).backward()
    seconds = time.perf_counter() - start
    print(json.dumps({"peak_mb": _peak_mb() - before, "seconds": seconds}))


def _run(variant: str, tokens: int, args: argparse.Namespace, chunk: int = 0) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", variant, "--tokens", str(tokens), "--vocab", str(args.vocab),
         "--hidden", str(args.hidden), "--chunk", str(chunk)],
        check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--chunks", default="1024,2048")
    parser.add_argument("--child")
    parser.add_argument("--chunk", type=int, default=0)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.tokens, args.vocab, args.hidden, args.chunk)
        return
    sizes = [args.tokens // 8, args.tokens // 4, args.tokens // 2, args.tokens]
    print(HEADING)
    print("```")
    print(f"vocab {args.vocab}, hidden {args.hidden}, forward + backward of log-probs and entropy; peak RSS above the inputs")
    print(f"{'variant':<22}{'tokens':>8}{'peak MB':>12}{'seconds':>10}")
    whole: dict[int, dict] = {}
    for tokens in sizes:
        measured = [n for n, result in whole.items() if not result.get("extrapolated")]
        if measured:
            last = max(measured)
            predicted = whole[last]["peak_mb"] * tokens / last
            if predicted > 0.5 * _available_mb():
                whole[tokens] = {"peak_mb": predicted, "seconds": float("nan"), "extrapolated": True}
                print(f"{'whole logits':<22}{tokens:>8}{predicted:>12.0f}{'-':>10}  (not run: extrapolated from {last} tokens)")
                continue
        whole[tokens] = _run("whole", tokens, args)
        print(f"{'whole logits':<22}{tokens:>8}{whole[tokens]['peak_mb']:>12.0f}{whole[tokens]['seconds']:>10.2f}")
    chunked: dict[tuple[int, int], dict] = {}
    for chunk in [int(c) for c in args.chunks.split(",")]:
        for tokens in sizes:
            chunked[chunk, tokens] = result = _run("chunked", tokens, args, chunk)
            print(f"{f'chunks of {chunk}':<22}{tokens:>8}{result['peak_mb']:>12.0f}{result['seconds']:>10.2f}")
    print()
    for chunk in [int(c) for c in args.chunks.split(",")]:
        for tokens in sizes:
            w, c = whole[tokens], chunked[chunk, tokens]
            note = " (whole extrapolated)" if w.get("extrapolated") else f", time ratio chunked/whole {c['seconds'] / w['seconds']:.2f}"
            print(f"{tokens} tokens, chunks of {chunk}: memory ratio whole/chunked {w['peak_mb'] / c['peak_mb']:.1f}{note}")
    print("```")


if __name__ == "__main__":
    main()
