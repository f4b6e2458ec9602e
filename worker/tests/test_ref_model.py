"""`ref_model_path` (actor_rollout_ref.ref.model.path): the KL reference is a frozen copy of another model, with or
without LoRA; its log-probs are that model's. Without it, a full-weight run keeps a copy of the initial model and a
LoRA run uses the policy with its adapter disabled (test_lora.py); a reference of another vocabulary is refused."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from agentrl_worker.protocol import ConfigError
from agentrl_worker.make_tiny import make_tiny
from agentrl_worker.trainer import Trainer

from test_update_gradient import _config, _plain_forward, env  # noqa: F401  (env is a fixture)
from worker_harness import TOKENIZER_DIR

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def other_model(env):
    """The same shape as env's model, other weights (another seed): log-probs that differ from the policy's."""
    return make_tiny(TOKENIZER_DIR, layers=1, hidden=32, out=env["root"] / "other", seed=11)


def _ref_log_probs(trainer: Trainer, env, name: str) -> torch.Tensor:
    out = env["root"] / f"{name}.safetensors"
    trainer.compute_log_probs(str(env["root"] / "batch.safetensors"), str(out))
    return load_file(out)


def _plain(model_dir, env) -> torch.Tensor:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.no_grad():
        return _plain_forward(model, env["batch"], list(range(env["batch"]["input_ids"].shape[0])))[0]


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_the_reference_is_the_named_model(env, other_model, lora_rank):
    trainer = Trainer(_config(env, ref_model_path=str(other_model), lora_rank=lora_rank))
    assert trainer.ref is not None  # a frozen copy, with LoRA too
    tensors = _ref_log_probs(trainer, env, f"ref-other-{lora_rank}")
    other, policy = _plain(other_model, env), _plain(env["model"], env)
    width = other.shape[1]
    assert torch.allclose(tensors["ref_log_probs"][:, :width], other, atol=1e-5)
    assert not torch.allclose(tensors["ref_log_probs"][:, :width], policy, atol=1e-3)
    # The policy is still the run's own model.
    assert torch.allclose(tensors["old_log_probs"][:, :width], policy, atol=1e-5)


def test_a_reference_of_another_vocabulary_or_without_a_config_is_refused(env, tmp_path):
    other = make_tiny(TOKENIZER_DIR, layers=1, hidden=32, out=tmp_path / "vocab", seed=3)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "vocab_size": config["vocab_size"] + 8}))
    with pytest.raises(ConfigError, match="vocab_size"):
        Trainer(_config(env, ref_model_path=str(other)))
    with pytest.raises(ConfigError, match="has no config.json"):
        Trainer(_config(env, ref_model_path=str(tmp_path / "missing")))
    with pytest.raises(ConfigError, match="needs use_ref"):
        Trainer(_config(env, ref_model_path=str(other), use_ref=False, use_kl_loss=False))
