"""The embedded engine, two checkouts side by side, on the CPU demo's turn pattern.

    .venv/bin/python bench/engine-ab.py --base ../base [--model DIR] [--conversations 128] [--rounds 6]

Each round sends N distinct two-turn conversations at once, as a GRPO step of the demo does: a prompt that starts
with a prefix every conversation shares (the chat template's tool list) and ends in its own tokens, 4 sampled tokens,
then the same conversation extended by the sampled tokens and a tool answer of its own, 2 more tokens. Every round's
conversations are new to both engines (their prefix caches only ever share the common prefix), and both engines get
the same ones. The two engines (this checkout's worker/ and --base's) run as separate processes with the same model
and flags; the rounds alternate which goes first. Reported: each side's median wall time and engine CPU (user +
system of its process) per round, and B/A. The ratio is the number: absolute times depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "lib"))

from engine_process import post, start_engine  # noqa: E402

PREFIX_TOKENS = 80
OWN_TOKENS = 20
TOOL_TOKENS = 14


class Engine:
    def __init__(self, name: str, tree: Path, model: str, max_batch: int):
        self.name = name
        self.process, self.url = start_engine(Path(model), "--max-batch", str(max_batch), "--log-level", "warning",
                                              worker_dir=tree / "worker")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def _generate(url: str, ids: list[int], new_tokens: int, seed: int) -> list[int]:
    body = {"input_ids": ids, "return_logprob": True,
            "sampling_params": {"max_new_tokens": new_tokens, "temperature": 1.0, "ignore_eos": True,
                                "sampling_seed": seed}}
    return list(post(url + "/generate", body, timeout=600)["output_ids"])


def _conversation(url: str, conv: tuple[list[int], list[int], int]) -> None:
    prompt, tool_answer, seed = conv
    first = _generate(url, prompt, 4, seed)
    _generate(url, prompt + first + tool_answer, 2, seed + 1)


def _round(engine: Engine, convs: list[tuple[list[int], list[int], int]]) -> tuple[float, float]:
    cpu, start = engine.cpu_seconds(), time.perf_counter()
    with ThreadPoolExecutor(len(convs)) as pool:
        list(pool.map(lambda c: _conversation(engine.url, c), convs))
    return time.perf_counter() - start, engine.cpu_seconds() - cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the other checkout (its worker/ is side A)")
    parser.add_argument("--model", default=None,
                        help="model folder; default runs/cpu-demo-sft/model, else examples/cpu-demo/model")
    parser.add_argument("--conversations", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--max-batch", type=int, default=64,
                        help="the engine's --max-batch (agentrl's default launch: 64)")
    args = parser.parse_args(argv)
    candidates = (ROOT / "runs/cpu-demo-sft/model", ROOT / "examples/cpu-demo/model")
    model = args.model or str(next(p for p in candidates if p.exists()))
    vocab = json.loads((Path(model) / "config.json").read_text())["vocab_size"]
    rng = random.Random(0)
    shared = [rng.randrange(min(vocab, 50)) for _ in range(PREFIX_TOKENS)]

    def conversations(round_index: int) -> list[tuple[list[int], list[int], int]]:
        r = random.Random(1000 + round_index)
        return [
            (shared + [r.randrange(min(vocab, 50)) for _ in range(OWN_TOKENS)],
             [r.randrange(min(vocab, 50)) for _ in range(TOOL_TOKENS)], round_index * 100_000 + 2 * i)
            for i in range(args.conversations)
        ]

    engines = [Engine("A (base)", Path(args.base).resolve(), model, args.max_batch),
               Engine("B (this)", ROOT, model, args.max_batch)]
    results: dict[str, list[tuple[float, float]]] = {e.name: [] for e in engines}
    try:
        for e in engines:  # warm-up: first-call allocations, the shared prefix in each prefix cache
            _round(e, conversations(-1))
        for i in range(args.rounds):
            for e in engines if i % 2 == 0 else engines[::-1]:
                results[e.name].append(_round(e, conversations(i)))
    finally:
        for e in engines:
            e.stop()
    print(f"embedded engine A/B, {args.conversations} two-turn conversations a round, {args.rounds} rounds, "
          f"model {model}")
    medians = {}
    for name, rows in results.items():
        wall, cpu = statistics.median(w for w, _ in rows), statistics.median(c for _, c in rows)
        medians[name] = (wall, cpu)
        print(f"  {name}: wall {wall * 1000:7.1f} ms/round, engine CPU {cpu * 1000:7.1f} ms/round"
              f"  (walls {', '.join(f'{w * 1000:.0f}' for w, _ in rows)})")
    (wa, ca), (wb, cb) = medians["A (base)"], medians["B (this)"]
    print(f"  B/A: wall {wb / wa:.2f}x, engine CPU {cb / ca:.2f}x")


if __name__ == "__main__":
    main()
