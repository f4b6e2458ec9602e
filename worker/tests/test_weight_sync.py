"""Weight sync without disk, both ends in one process: the trainer's sender (weight_sync.py) and the embedded engine's
/init_weights_update_group + /update_weights_from_distributed (gloo on the CPU).

1. Bucketing: every parameter once, in order, no bucket over the limit unless one tensor alone is bigger. A bucket
   that drops or reorders a tensor would silently desynchronise the broadcast from the announcement.
2. Two engines (processes of their own: torch registers a group's name once per process) serving model A receive model B's tensors and then hold B bit for bit (/get_weights_by_name), and
   generate what a fresh engine serving B generates; the weight version comes with the last bucket only.
3. Through a 2-rank FSDP2 worker, the plan has every parameter's full shape, not a rank's shard: test_worker.py, on
   its shared 2-rank worker (test_a_two_rank_plan_names_every_parameter_whole_and_a_broadcast_needs_the_group).

The engine processes start as a managing parent (agentrl serve) starts `python -m agentrl_worker.embedded_server`
(engine_processes; test_embedded_lora.py starts one too), which checks its command line for test_embedded_server.py:
the URL on the first stdout line, /health answering, and exit status 0 on SIGTERM, here with the weight group joined.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import pytest
import torch
from transformers import AutoModelForCausalLM

from agentrl_worker.embedded_server import ServerConfig, load_model, start_server
from agentrl_worker.make_tiny import make_tiny
from agentrl_worker.weight_sync import TensorSpec, WeightSender, plan_buckets

from test_embedded_server import call, generate
from worker_harness import REPO_ROOT

DEMO_TOKENIZER = REPO_ROOT / "examples" / "cpu-demo" / "model"


def _spec(name: str, numel: int) -> TensorSpec:
    return TensorSpec(name, "float32", [numel])


def test_buckets_keep_order_and_respect_the_limit():
    specs = [_spec("a", 10), _spec("b", 10), _spec("c", 30), _spec("d", 5), _spec("e", 100), _spec("f", 1)]
    buckets = plan_buckets(specs, bucket_bytes=4 * 30)
    assert [[s.name for s in b] for b in buckets] == [["a", "b"], ["c"], ["d"], ["e"], ["f"]]
    assert [s for b in buckets for s in b] == specs
    # Only a tensor bigger than the limit makes a bucket bigger than the limit, and then it is alone.
    assert all(sum(s.nbytes for s in b) <= 120 or len(b) == 1 for b in buckets)


def test_one_big_bucket_holds_everything_and_dtype_sets_the_bytes():
    specs = [TensorSpec("w", "bfloat16", [4, 8]), TensorSpec("b", "bfloat16", [8])]
    assert specs[0].nbytes == 64 and specs[1].nbytes == 16
    assert plan_buckets(specs, bucket_bytes=1 << 30) == [specs]
    with pytest.raises(ValueError, match="bucket_bytes"):
        plan_buckets(specs, bucket_bytes=0)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("sync-models")
    # The CPU demo's 64-token vocabulary: /get_weights_by_name answers every value as JSON, and with Qwen3's 151,936
    # tokens the embedding and head dominated the file's time even at hidden 8; the claims are about tensors, not the
    # vocabulary's size.
    a = make_tiny(DEMO_TOKENIZER, layers=2, hidden=32, out=base / "a", seed=0, arch="qwen2")
    b = make_tiny(DEMO_TOKENIZER, layers=2, hidden=32, out=base / "b", seed=1, arch="qwen2")
    return a, b


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def engine_processes(*models: Path) -> Iterator[list[SimpleNamespace]]:
    """`python -m agentrl_worker.embedded_server --port 0`, one process per model, all starting at once, as a managing
    parent runs it: the URL is read from the first stdout line (the default host, 127.0.0.1), /health answers 200, and
    once the caller is done a SIGTERM stops each process with exit status 0."""
    procs = []
    try:
        for model in models:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "agentrl_worker.embedded_server", "--model", str(model), "--port", "0",
                 "--device", "cpu", "--max-batch", "4"],
                cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, text=True,
            ))
        engines = []
        for proc in procs:
            line = proc.stdout.readline()
            match = re.search(r"on (http://127\.0\.0\.1:\d+)", line)
            assert match, f"no URL in the engine's first line: {line!r}"
            with urllib.request.urlopen(match.group(1) + "/health", timeout=30) as response:
                assert response.status == 200
            engines.append(SimpleNamespace(url=match.group(1)))
        yield engines
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        assert [proc.wait(timeout=60) for proc in procs] == [0] * len(procs)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()


@contextmanager
def engine_process(model: Path) -> Iterator[SimpleNamespace]:
    """One engine process (engine_processes)."""
    with engine_processes(model) as (engine,):
        yield engine


def test_two_engines_receive_the_trainers_weights_bit_for_bit(models):
    path_a, path_b = models
    trainer_model = AutoModelForCausalLM.from_pretrained(str(path_b), dtype=torch.float32)
    with engine_processes(path_a, path_a) as servers:
        sender = WeightSender(trainer_model, rank=0, device=torch.device("cpu"), default_dtype="float32")
        port = _free_port()
        group = {"master_address": "127.0.0.1", "master_port": port, "world_size": 3, "group_name": "g", "backend": "gloo"}
        with ThreadPoolExecutor(4) as pool:
            joined = [pool.submit(call, s, "/init_weights_update_group", {**group, "rank_offset": 1 + i})
                      for i, s in enumerate(servers)]
            sender.join("127.0.0.1", port, 3, "g", "gloo", timeout_s=60)
            assert [f.result() for f in joined] == [(200, {"success": True, "message": "Succeeded to initialize custom process group."})] * 2

            buckets = sender.plan(bucket_bytes=8 * 1024, dtype=None)["buckets"]
            assert len(buckets) > 1
            for i, bucket in enumerate(buckets):
                last = i == len(buckets) - 1
                body = {**bucket, "group_name": "g", "flush_cache": last, **({"weight_version": "7"} if last else {})}
                answers = [pool.submit(call, s, "/update_weights_from_distributed", body) for s in servers]
                sender.broadcast(bucket["names"], dtype=None)
                assert all(f.result()[0] == 200 and f.result()[1]["success"] for f in answers)

        expected = dict(trainer_model.named_parameters())
        for server in servers:
            for name, param in expected.items():
                status, values = call(server, "/get_weights_by_name", {"name": name, "truncate_size": 1 << 20})
                assert status == 200
                assert torch.equal(torch.tensor(values, dtype=torch.float32), param.detach()), name
            assert call(server, "/model_info")[1]["weight_version"] == "7"

        fresh = start_server(load_model(str(path_b)), ServerConfig(port=0))
        try:
            prompt = [17, 5, 40, 0, 33, 12]
            want = generate(fresh, prompt, max_new_tokens=8, temperature=0)
            for server in servers:
                got = generate(server, prompt, max_new_tokens=8, temperature=0)
                assert got["output_ids"] == want["output_ids"]
                assert got["meta_info"]["output_token_logprobs"] == want["meta_info"]["output_token_logprobs"]
        finally:
            fresh.shutdown()


def test_a_bucket_for_an_unknown_group_fails_without_receiving(models):
    server = start_server(load_model(str(models[0])), ServerConfig(port=0))
    try:
        status, answer = call(server, "/update_weights_from_distributed",
                              {"names": ["x"], "dtypes": ["float32"], "shapes": [[1]], "group_name": "none"})
        assert status == 400 and answer["success"] is False and "init_weights_update_group" in answer["message"]
        status, answer = call(server, "/init_weights_update_group",
                              {"master_address": "127.0.0.1", "master_port": 1, "rank_offset": 1, "world_size": 2, "backend": "nccl"})
        assert status == 400 and "gloo" in answer["message"]
        status, answer = call(server, "/update_weight_version", {"new_version": "v9"})
        assert (status, answer["new_version"]) == (200, "v9")
        assert call(server, "/model_info")[1]["weight_version"] == "v9"
        assert call(server, "/get_weights_by_name", {"name": "nope"})[0] == 400
    finally:
        server.shutdown()
