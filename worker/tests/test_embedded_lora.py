"""LoRA from the trainer to the embedded engine (issue 30): each of the three sync paths leaves the engine holding what
the trainer holds, bit for bit, and the engine samples with the adapter at the trainer's log-probs.

- adapter: the worker's `save_adapter` folder, loaded with /load_lora_adapter under a versioned name and named per
  request in `lora_path`; the weight version of a LoRA request is its adapter's name; a request naming an adapter the
  server does not hold is a 400, never the base model;
- merged, disk: `save_weights` (W + B·A·alpha/r) and /update_weights_from_disk;
- merged, distributed: the worker's sender broadcasting merged tensors to an engine process over gloo.

The trainer is one in-process rank on a tiny Qwen2 (hidden 16) after one update, so the adapter's B is no longer 0.
"""

from __future__ import annotations

import logging
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from safetensors.torch import load_file, save_file

from agentrl_worker import lora
from agentrl_worker.config import WorkerConfig
from agentrl_worker.embedded_server import ServerConfig, load_model, start_server
from agentrl_worker.make_tiny import make_tiny
from agentrl_worker.trainer import Trainer
from worker_harness import TOKENIZER_DIR, build_batch, cpu_rank, noisy_log_probs

from test_embedded_server import LOGPROB_TOLERANCE, call, generate
from test_weight_sync import _free_port, engine_process

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("embedded-lora")
    model = make_tiny(TOKENIZER_DIR, layers=2, hidden=16, out=root / "tiny", seed=3, arch="qwen2")
    batch = build_batch(root / "batch.safetensors", prompts=2, samples=2)
    with cpu_rank(root):
        trainer = Trainer(WorkerConfig.from_dict({
            "model_path": str(model), "lr": 5e-2, "seed": 2, "lora_rank": 4, "lora_alpha": 8, "target_modules": "all-linear",
        }))
        trainer.compute_log_probs(str(root / "batch.safetensors"), str(root / "lp.safetensors"))
        noisy_log_probs(batch, load_file(root / "lp.safetensors")["old_log_probs"], seed=4)
        save_file({"old_log_probs": batch["old_log_probs"]}, str(root / "lp.safetensors"))
        trainer.update(str(root / "batch.safetensors"), str(root / "lp.safetensors"))
        params = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        assert any(p.abs().max() > 0 for n, p in params.items() if ".lora_B." in n)
        yield {"root": root, "model": model, "trainer": trainer, "batch": batch, "params": params,
               "merged": lora.merged_state(params, lora.scaling(trainer.model))}


def _trainer_log_probs(trained, prompt: list[int], output: list[int]) -> torch.Tensor:
    root, ids = trained["root"], prompt + output
    save_file({
        "input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long),
        "response_mask": torch.tensor([[0] * len(prompt) + [1] * len(output)]),
    }, str(root / "sampled.safetensors"))
    trained["trainer"].compute_log_probs(str(root / "sampled.safetensors"), str(root / "sampled-lp.safetensors"))
    return load_file(root / "sampled-lp.safetensors")["old_log_probs"][0, len(prompt):]


def test_the_adapter_loads_by_name_and_samples_at_the_trainers_log_probs(trained, caplog):
    caplog.set_level(logging.INFO, logger="agentrl_worker.embedded_server")
    root = trained["root"]
    trained["trainer"].save_adapter(str(root / "adapter"))
    server = start_server(load_model(str(trained["model"])), ServerConfig(port=0, enable_lora=True, max_lora_rank=8))
    try:
        status, answer = call(server, "/load_lora_adapter", {"lora_name": "1", "lora_path": str(root / "adapter")})
        assert status == 200 and answer["success"] and answer["loaded_adapters"] == {"1": str(root / "adapter")}
        # the engine holds the trainer's A and B bit for bit
        held = server.scheduler.adapters.adapters["1"].weights
        for name, value in trained["params"].items():
            if ".lora_A." in name or ".lora_B." in name:
                module = lora.hf_name(name).split(".lora_")[0]
                assert torch.equal(held[module][0 if ".lora_A." in name else 1], value), name
        prompt = trained["batch"]["input_ids"][0, :24].tolist()
        answer = call(server, "/generate", {"input_ids": prompt, "lora_path": "1", "return_logprob": True,
                                            "sampling_params": {"max_new_tokens": 8, "temperature": 1.0, "sampling_seed": 5}})[1]
        assert answer["meta_info"]["weight_version"] == "1"
        output = answer["output_ids"]
        engine = torch.tensor([lp for lp, _, _ in answer["meta_info"]["output_token_logprobs"]])
        assert (engine - _trainer_log_probs(trained, prompt, output)).abs().max() < LOGPROB_TOLERANCE
        base = generate(server, prompt, max_new_tokens=8, temperature=0)
        assert base["meta_info"]["weight_version"] == "default"
        # an adapter the server does not hold is refused, never served by the base model
        status, answer = call(server, "/generate", {"input_ids": prompt, "lora_path": "2", "sampling_params": {"max_new_tokens": 2}})
        assert status == 400 and "'2' is not loaded" in answer["error"]["message"]
        assert call(server, "/load_lora_adapter", {"lora_name": "1", "lora_path": str(root / "adapter")})[0] == 400
        status, answer = call(server, "/unload_lora_adapter", {"lora_name": "1"})
        assert status == 200 and answer["loaded_adapters"] == {}
        # the log says what each update did: the unload drops the adapter's tensors, it loads none
        lines = [r.getMessage() for r in caplog.records if "tensors" in r.getMessage()]
        assert re.fullmatch(r"loaded \d+ tensors of LoRA adapter '1' from .*adapter, weight_version default", lines[0]), lines
        assert re.fullmatch(r"unloaded \d+ tensors of LoRA adapter '1', weight_version default", lines[-1]), lines
        assert call(server, "/generate", {"input_ids": prompt, "lora_path": "1", "sampling_params": {"max_new_tokens": 2}})[0] == 400
    finally:
        server.shutdown()
    plain = start_server(load_model(str(trained["model"])), ServerConfig(port=0))
    try:
        status, answer = call(plain, "/load_lora_adapter", {"lora_name": "1", "lora_path": str(root / "adapter")})
        assert status == 400 and "--enable-lora" in answer["error_message"]
    finally:
        plain.shutdown()


def test_the_merged_model_through_disk_is_the_trainers_bit_for_bit(trained):
    root = trained["root"]
    trained["trainer"].save_weights(str(root / "merged"), "float32")
    server = start_server(load_model(str(trained["model"])), ServerConfig(port=0))
    try:
        status, answer = call(server, "/update_weights_from_disk", {"model_path": str(root / "merged"), "weight_version": "1"})
        assert status == 200, answer
        state = server.loaded.model.state_dict()
        for name, value in trained["merged"].items():
            assert torch.equal(state[name], value), name
    finally:
        server.shutdown()


def test_the_merged_model_through_a_weight_group_is_the_trainers_bit_for_bit(trained):
    sender = trained["trainer"]._weights
    with engine_process(trained["model"]) as engine:
        port = _free_port()
        group = {"master_address": "127.0.0.1", "master_port": port, "world_size": 2, "group_name": "lora", "backend": "gloo"}
        with ThreadPoolExecutor(2) as pool:
            joined = pool.submit(call, engine, "/init_weights_update_group", {**group, "rank_offset": 1})
            sender.join("127.0.0.1", port, 2, "lora", "gloo", timeout_s=60)
            assert joined.result()[0] == 200
            for bucket in sender.plan(bucket_bytes=1 << 20, dtype="float32")["buckets"]:
                answer = pool.submit(call, engine, "/update_weights_from_distributed", {**bucket, "group_name": "lora"})
                sender.broadcast(bucket["names"], dtype="float32")
                assert answer.result()[0] == 200
        # every adapted weight (the embeddings are the base's, untouched by the adapter and costly as JSON)
        for name, value in trained["merged"].items():
            if "embed" in name or "lm_head" in name:
                continue
            status, values = call(engine, "/get_weights_by_name", {"name": name, "truncate_size": 1 << 20})
            assert status == 200 and torch.equal(torch.tensor(values, dtype=torch.float32), value), name


def test_export_lora_merges_the_adapter_folder_into_the_base_as_the_worker_does(trained):
    """The documented export (python -m agentrl_worker.export_lora) of a run's adapter folder equals the worker's
    merged save_weights bit for bit."""
    from agentrl_worker.export_lora import main

    root = trained["root"]
    trained["trainer"].save_adapter(str(root / "adapter-export"))
    trained["trainer"].save_weights(str(root / "merged-export"), "float32")
    assert main(["--adapter", str(root / "adapter-export"), "--out", str(root / "exported")]) == 0
    want, got = load_file(root / "merged-export" / "model.safetensors"), load_file(root / "exported" / "model.safetensors")
    assert set(got) == set(want)
    for name, value in want.items():
        assert torch.equal(got[name], value), name
    assert sorted(p.name for p in (root / "exported").iterdir()) == sorted(p.name for p in (root / "merged-export").iterdir())
