"""The memory settings change where tensors live and what is recomputed, never the training: gradient
checkpointing, FSDP2 parameter offload and optimizer-state offload give the same losses and weights as none of them,
on one in-process rank on the CPU (where the offloads run their code but have no other memory to move to)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from agentrl_worker.config import WorkerConfig
from agentrl_worker.make_tiny import make_tiny
from agentrl_worker.trainer import Trainer, _move_optimizer_state

from worker_harness import TOKENIZER_DIR, build_batch, cpu_rank

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("memory-options")
    model_dir = make_tiny(TOKENIZER_DIR, layers=2, hidden=32, out=root / "tiny", seed=6)
    build_batch(root / "batch.safetensors", prompts=2, samples=2)
    with cpu_rank(root):
        yield {"model": model_dir, "batch": str(root / "batch.safetensors")}


def _two_steps(env, **options) -> tuple[list[dict], dict[str, torch.Tensor]]:
    trainer = Trainer(WorkerConfig.from_dict({"model_path": str(env["model"]), "lr": 1e-2, "seed": 2,
                                              "micro_batch_token_budget": 200, **options}))
    replies = [trainer.sft_step(env["batch"])["metrics"] for _ in range(2)]
    state = trainer._full_model_state()
    return replies, state


@pytest.fixture(scope="module")
def baseline(env) -> tuple[list[dict], dict[str, torch.Tensor]]:
    """The two steps with none of the options, once for all the cases below (seeded: each would compute the same)."""
    return _two_steps(env)


@pytest.mark.parametrize("options", [
    {"gradient_checkpointing": True},
    {"param_offload": True},
    {"optimizer_offload": True},
    {"gradient_checkpointing": True, "param_offload": True, "optimizer_offload": True},
])
def test_memory_options_train_the_same(env, baseline, options, monkeypatch):
    import torch.distributed.fsdp as fsdp

    policies = []
    shard = fsdp.fully_shard

    def spy(module, **kwargs):
        policies.append(kwargs.get("offload_policy"))
        return shard(module, **kwargs)

    baseline, weights = baseline
    monkeypatch.setattr(fsdp, "fully_shard", spy)
    replies, state = _two_steps(env, **options)
    # param_offload reaches FSDP2 as its CPU offload policy on every sharded module; without it, one rank in float32
    # keeps the plain model (nothing to shard), so nothing is sharded at all
    assert bool(policies) == bool(options.get("param_offload"))
    assert all(isinstance(p, fsdp.CPUOffloadPolicy) for p in policies)
    for got, want in zip(replies, baseline):
        for name in ("sft/loss", "sft/grad_norm"):
            assert got[name] == pytest.approx(want[name], rel=1e-5, abs=1e-6), name
    assert baseline[0]["sft/loss"] != baseline[1]["sft/loss"]  # the first step moved the weights
    for name, value in weights.items():
        assert torch.allclose(state[name], value, atol=1e-5, rtol=0), name


def test_optimizer_state_comes_back_next_to_its_parameter_for_the_step_and_the_step_counter_stays():
    # The meta device stands for a GPU here: tensors can move to it but not back, so only this direction is checked.
    param = torch.nn.Parameter(torch.zeros(3, device="meta"))
    optimizer = torch.optim.AdamW([param])
    optimizer.state[param] = {"step": torch.tensor(1.0), "exp_avg": torch.ones(3), "exp_avg_sq": torch.ones(3)}
    _move_optimizer_state(optimizer, offload=True)  # already in CPU memory: nothing moves
    assert {k: v.device.type for k, v in optimizer.state[param].items()} == {"step": "cpu", "exp_avg": "cpu", "exp_avg_sq": "cpu"}
    _move_optimizer_state(optimizer, offload=False)
    assert {k: v.device.type for k, v in optimizer.state[param].items()} == {"step": "cpu", "exp_avg": "meta", "exp_avg_sq": "meta"}
