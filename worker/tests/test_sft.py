"""Supervised fine-tuning in the worker: `sft_step` cut into micro-batches against one plain forward of the batch.

One in-process rank (gloo, world size 1, FSDP2 on the CPU) accumulates the SFT gradient of a batch of multi-turn
conversations with a token budget that forces several micro-batches; a plain transformers copy of the same weights
computes the token-mean negative log-likelihood of the loss-mask tokens of the whole batch in one go. The gradients
must agree, and so must `sft_eval`'s loss. Then a few `sft_step`s on the batch must lower its loss.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from agentrl_worker import algos
from agentrl_worker.batch import load_batch
from agentrl_worker.config import WorkerConfig
from agentrl_worker.make_tiny import make_tiny
from agentrl_worker.trainer import Trainer

from worker_harness import TOKENIZER_DIR, build_batch

pytestmark = pytest.mark.slow


def _full(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("sft")
    model_dir = make_tiny(TOKENIZER_DIR, layers=1, hidden=32, out=root / "tiny", seed=4)
    build_batch(root / "batch.safetensors", prompts=2, samples=3)
    dist.init_process_group("gloo", init_method=f"file://{root / 'pg'}", rank=0, world_size=1)
    try:
        yield {"root": root, "model": model_dir, "batch_path": str(root / "batch.safetensors")}
    finally:
        dist.destroy_process_group()


def _trainer(env) -> Trainer:
    batch = load_batch(env["batch_path"])
    longest = int(batch["attention_mask"].sum(-1).max())
    # About two conversations per micro-batch, so the batch of six is cut into three.
    return Trainer(WorkerConfig.from_dict({"model_path": str(env["model"]), "lr": 1e-2, "seed": 1, "micro_batch_token_budget": 2 * longest}))


@pytest.fixture(scope="module")
def reference(env) -> dict:
    """The plain transformers copy's token-mean NLL of the whole batch in one go and its gradients, at the initial
    weights: computed once for both tests below."""
    from transformers import AutoModelForCausalLM

    batch = load_batch(env["batch_path"])
    model = AutoModelForCausalLM.from_pretrained(env["model"], dtype=torch.float32)
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    picked = algos.token_log_probs(logits[:, :-1], batch["input_ids"][:, 1:])
    mask = batch["response_mask"][:, 1:].float()
    loss = -(picked * mask).sum() / mask.sum()
    loss.backward()
    return {"loss": loss.item(), "grads": {name: p.grad for name, p in model.named_parameters() if p.grad is not None}}


def test_sft_gradient_over_micro_batches_equals_the_whole_batch_token_mean(env, reference):
    trainer = _trainer(env)
    batch = load_batch(env["batch_path"])
    plan = trainer._plan(batch, list(range(batch["input_ids"].shape[0])))
    assert len(plan.per_rank[0]) >= 3
    tokens = float(batch["response_mask"].sum())
    trainer.optimizer.zero_grad(set_to_none=True)
    sums = trainer._sft_micro_losses(batch, tokens, train=True)
    assert sums["tokens"] == tokens
    assert sums["nll_sum"] / tokens == pytest.approx(reference["loss"], rel=1e-5)
    got = {name: _full(p.grad) for name, p in trainer.model.named_parameters() if p.grad is not None}
    expected = reference["grads"]
    assert set(got) == set(expected) and len(got) > 5
    for name, grad in expected.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_sft_eval_reports_the_loss_and_sft_step_lowers_it(env, reference):
    trainer = _trainer(env)
    batch = load_batch(env["batch_path"])
    before = trainer.sft_eval(env["batch_path"])["metrics"]
    assert before["val/loss"] == pytest.approx(reference["loss"], rel=1e-5)
    assert before["val/tokens"] == float(batch["response_mask"].sum())
    steps = [trainer.sft_step(env["batch_path"]) for _ in range(5)]
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5]
    assert all(s["metrics"]["sft/skipped_step"] == 0.0 and s["metrics"]["sft/grad_norm"] > 0 for s in steps)
    after = trainer.sft_eval(env["batch_path"])["metrics"]
    assert after["val/loss"] < 0.9 * before["val/loss"]


def test_sft_step_refuses_a_batch_without_loss_tokens(env, tmp_path):
    from safetensors.torch import save_file

    from agentrl_worker.config import ConfigError

    batch = load_batch(env["batch_path"])
    save_file({**batch, "response_mask": torch.zeros_like(batch["response_mask"])}, str(tmp_path / "empty.safetensors"))
    with pytest.raises(ConfigError, match="no token with response_mask 1"):
        _trainer(env).sft_step(str(tmp_path / "empty.safetensors"))
