"""Packed micro-batches (use_remove_padding) against padded ones, on one in-process rank (gloo, FSDP2 on the CPU) in
float32: the same log-probs, entropies, losses and gradients within 1e-5, for rows of very different lengths, right-
and left-padded, with several turns each."""

from __future__ import annotations

import pytest
import torch

from agentrl_worker.config import WorkerConfig
from agentrl_worker.make_tiny import make_tiny
from agentrl_worker.trainer import Trainer

from worker_harness import TOKENIZER_DIR, assert_same_update, cpu_rank, noisy_log_probs

pytestmark = pytest.mark.slow

LENGTHS = [150, 9, 61, 23, 97, 12]
TOL = 1e-5


def _batch(vocab: int) -> dict[str, torch.Tensor]:
    """Random tokens; each row a prompt then alternating sampled (mask 1) and environment (mask 0) chunks; row 1 is
    left-padded, the others right-padded."""
    gen = torch.Generator().manual_seed(3)
    width = max(LENGTHS) + 4
    input_ids = torch.zeros(len(LENGTHS), width, dtype=torch.int64)
    attention = torch.zeros_like(input_ids)
    response = torch.zeros_like(input_ids)
    for i, n in enumerate(LENGTHS):
        start = width - n if i == 1 else 0
        input_ids[i, start : start + n] = torch.randint(0, vocab, (n,), generator=gen)
        attention[i, start : start + n] = 1
        prompt = max(2, n // 4)
        chunk = torch.arange(n - prompt) // max(1, n // 6)
        response[i, start + prompt : start + n] = (chunk % 2 == 0).long()
    return {
        "input_ids": input_ids, "attention_mask": attention, "response_mask": response,
        "rewards": torch.tensor([1.0, 0.0, 1.0, 0.0, 0.5, 0.0]), "group_ids": torch.tensor([0, 0, 1, 1, 2, 2]),
    }


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("packing")
    model_dir = make_tiny(TOKENIZER_DIR, layers=2, hidden=32, out=root / "tiny", seed=4)
    qwen2 = make_tiny(TOKENIZER_DIR, layers=2, hidden=32, out=root / "tiny-qwen2", seed=4, arch="qwen2")
    with cpu_rank(root):
        yield {"model": model_dir, "qwen2": qwen2}


def _trainer(env, packed: bool, arch: str = "model", **overrides) -> Trainer:
    return Trainer(WorkerConfig.from_dict({
        "model_path": str(env[arch]), "seed": 1, "temperature": 0.8, "use_remove_padding": packed, "packed_sdpa": packed,
        "logprob_chunk_tokens": 64, **overrides,
    }))


def _vocab(trainer: Trainer) -> int:
    return trainer.model.config.vocab_size


def test_without_a_varlen_kernel_use_remove_padding_pads_unless_packed_sdpa(env):
    # sdpa runs packed rows only through a mask over the whole packed length: 30x slower on the CPU demo.
    assert not Trainer(WorkerConfig.from_dict({"model_path": str(env["model"]), "use_remove_padding": True})).packed
    assert _trainer(env, True).packed


@pytest.mark.parametrize("arch", ["model", "qwen2"])
def test_packed_forward_equals_padded_log_probs_and_entropy(env, arch):
    packed, padded = _trainer(env, True, arch), _trainer(env, False, arch)
    assert packed.packed and not padded.packed
    batch = _batch(_vocab(packed))
    rows = [0, 1, 2, 3, 4, 5]
    with torch.no_grad():
        lp_packed, ent_packed = packed._forward(packed.model, batch, rows)
        lp_padded, ent_padded = padded._forward(padded.model, batch, rows)
    mask = batch["response_mask"][rows, : lp_packed.shape[1]].bool()
    assert lp_packed.shape == lp_padded.shape and mask.sum() > 100
    assert (lp_packed[mask] < 0).all() and (lp_packed[~mask] == 0).all() and (ent_packed[~mask] == 0).all()
    assert (lp_packed - lp_padded).abs().max() <= TOL
    assert (ent_packed - ent_padded).abs().max() <= TOL


def test_packed_rows_do_not_see_each_other(env):
    """Each row alone gives the log-probs it gets packed with the others: attention stays inside a row."""
    trainer = _trainer(env, True)
    batch = _batch(_vocab(trainer))
    with torch.no_grad():
        together, _ = trainer._forward(trainer.model, batch, [0, 2, 3])
        for i, row in enumerate([0, 2, 3]):
            alone, _ = trainer._forward(trainer.model, batch, [row])
            width = alone.shape[1]
            assert (together[i, :width] - alone[0]).abs().max() <= TOL


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_packed_update_gradient_equals_padded(env, mode):
    """The trainer's loss (policy, entropy bonus, KL to a reference) and its gradient, packed vs padded; the budget
    cuts each into several micro-batches, differently."""
    config = {"loss_agg_mode": mode, "entropy_coeff": 0.05, "micro_batch_token_budget": 200, "use_ref": True,
              "use_kl_loss": True, "kl_loss_coef": 0.5}
    packed, padded = _trainer(env, True, **config), _trainer(env, False, **config)
    batch = _batch(_vocab(packed))
    rows = list(range(len(LENGTHS)))
    with torch.no_grad():
        noisy_log_probs(batch, padded._forward(padded.model, batch, rows)[0], seed=9)
    assert len(packed._plan(batch, rows).per_rank[0]) > 1 and len(padded._plan(batch, rows).per_rank[0]) > 1
    assert_same_update((packed, padded), batch, TOL)
