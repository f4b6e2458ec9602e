"""Shared prefixes (worker option share_prefix): the tokens every row of a padded micro-batch has in common run once,
the rest of each row on a copy of their key/value cache. Against the same trainer with the option off, on one
in-process rank (gloo) in float32: the same log-probs, entropies, losses and gradients within 1e-5, for rows that share
a system prompt, then a prompt per group, then multi-turn responses of different lengths, right-padded."""

from __future__ import annotations

import pytest
import torch

from agentrl_worker import trainer as trainer_module
from agentrl_worker.batch import shared_prefix_length
from agentrl_worker.config import WorkerConfig
from agentrl_worker.make_tiny import make_tiny
from agentrl_worker.trainer import MIN_SHARED_PREFIX, Trainer

from worker_harness import TOKENIZER_DIR, assert_same_update, cpu_rank, noisy_log_probs

pytestmark = pytest.mark.slow

SYSTEM, QUESTION = 40, 12
RESPONSES = [30, 7, 18, 25, 3, 11]  # per row; rows 0-2 are group 0, rows 3-5 group 1
TOL = 1e-5


def _batch(vocab: int, left_padded_row: int | None = None) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(5)
    system = torch.randint(0, vocab, (SYSTEM,), generator=gen)
    questions = [torch.randint(0, vocab, (QUESTION,), generator=gen) for _ in range(2)]
    lengths = [SYSTEM + QUESTION + n for n in RESPONSES]
    width = max(lengths) + 3
    input_ids = torch.zeros(len(RESPONSES), width, dtype=torch.int64)
    attention, response = torch.zeros_like(input_ids), torch.zeros_like(input_ids)
    for i, n in enumerate(RESPONSES):
        row = torch.cat([system, questions[i // 3], torch.randint(0, vocab, (n,), generator=gen)])
        start = width - len(row) if i == left_padded_row else 0
        input_ids[i, start : start + len(row)] = row
        attention[i, start : start + len(row)] = 1
        turns = (torch.arange(n) // 5) % 2 == 0  # sampled chunks of 5 (mask 1) between environment chunks (mask 0)
        response[i, start + SYSTEM + QUESTION : start + len(row)] = turns.long()
    return {
        "input_ids": input_ids, "attention_mask": attention, "response_mask": response,
        "rewards": torch.tensor([1.0, 0.0, 1.0, 0.0, 0.5, 1.0]), "group_ids": torch.tensor([0, 0, 0, 1, 1, 1]),
    }


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared-prefix")
    model_dir = make_tiny(TOKENIZER_DIR, layers=2, hidden=32, out=root / "tiny", seed=4)
    with cpu_rank(root):
        yield model_dir


def _trainer(model_dir, share: bool, **overrides) -> Trainer:
    return Trainer(WorkerConfig.from_dict({
        "model_path": str(model_dir), "seed": 1, "temperature": 0.8, "use_remove_padding": False,
        "share_prefix": share, "logprob_chunk_tokens": 64, **overrides,
    }))


@pytest.fixture
def prefix_calls(monkeypatch):
    """How many micro-batches ran a shared prefix, and how long each was."""
    calls: list[int] = []
    original = trainer_module._after_shared_prefix

    def spy(model, prefix, **inputs):
        calls.append(prefix)
        return original(model, prefix, **inputs)

    monkeypatch.setattr(trainer_module, "_after_shared_prefix", spy)
    return calls


def test_shared_prefix_length_stops_at_the_first_difference_padding_or_limit():
    ids = torch.tensor([[1, 2, 3, 4, 5], [1, 2, 3, 9, 5], [1, 2, 3, 4, 0]])
    ones = torch.ones_like(ids)
    assert shared_prefix_length(ids, ones, 10) == 3
    assert shared_prefix_length(ids, ones, 2) == 2
    assert shared_prefix_length(ids[[0, 2]], ones[[0, 2]], 10) == 4
    left_padded = ones.clone()
    left_padded[1, 0] = 0
    assert shared_prefix_length(ids, left_padded, 10) == 0
    assert shared_prefix_length(ids[:1], ones[:1], 10) == 5


def test_log_probs_and_entropy_equal_the_full_rows(env, prefix_calls):
    shared, full = _trainer(env, True), _trainer(env, False)
    batch = _batch(shared.model.config.vocab_size)
    rows = list(range(len(RESPONSES)))
    with torch.no_grad():
        lp_shared, ent_shared = shared._forward(shared.model, batch, rows)
        assert prefix_calls == [SYSTEM]  # the groups' prompts differ after the system prompt
        lp_full, ent_full = full._forward(full.model, batch, rows)
        assert prefix_calls == [SYSTEM]
        group, _ = shared._forward(shared.model, batch, [3, 4, 5])
        # One group: its whole prompt but the last token, which predicts the first response token.
        assert prefix_calls[-1] == SYSTEM + QUESTION - 1
    mask = batch["response_mask"][:, : lp_full.shape[1]].bool()
    assert lp_shared.shape == lp_full.shape and mask.sum() > 40
    assert (lp_shared[~mask] == 0).all() and (ent_shared[~mask] == 0).all()
    assert (lp_shared - lp_full).abs().max() <= TOL
    # Entropies near ln(151k) = 11.9: float32 rounding of their sums is relative.
    assert ((ent_shared - ent_full).abs() <= TOL + 2e-6 * ent_full.abs()).all()
    assert (group - lp_full[3:, : group.shape[1]]).abs().max() <= TOL


def test_a_left_padded_row_shares_nothing(env, prefix_calls):
    trainer = _trainer(env, True)
    batch = _batch(trainer.model.config.vocab_size, left_padded_row=1)
    with torch.no_grad():
        trainer._forward(trainer.model, batch, list(range(len(RESPONSES))))
        trainer._forward(trainer.model, batch, [0, 2])
    assert prefix_calls == [SYSTEM + QUESTION - 1]
    assert SYSTEM >= MIN_SHARED_PREFIX


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum"])
def test_update_losses_and_gradients_equal_the_full_rows(env, prefix_calls, mode):
    """The trainer's loss (policy, entropy bonus, KL to a reference) and its gradient, cut by the budget into several
    micro-batches, each with its own shared prefix."""
    config = {"loss_agg_mode": mode, "entropy_coeff": 0.05, "micro_batch_token_budget": 250, "use_ref": True,
              "use_kl_loss": True, "kl_loss_coef": 0.5}
    shared, full = _trainer(env, True, **config), _trainer(env, False, **config)
    assert shared.fsdp == "none"
    batch = _batch(shared.model.config.vocab_size)
    rows = list(range(len(RESPONSES)))
    with torch.no_grad():
        noisy_log_probs(batch, full._forward(full.model, batch, rows)[0], seed=9)
    assert len(shared._plan(batch, rows).per_rank[0]) > 1
    calls_before = len(prefix_calls)
    assert_same_update((shared, full), batch, TOL)
    assert len(prefix_calls) - calls_before > 1  # the shared trainer's micro-batches each ran a prefix


def test_under_fsdp_only_the_gradient_free_passes_share(env, prefix_calls):
    """FSDP (here forced by param_offload on one rank) frees a layer's gathered weights after the layer's first
    backward, so the update runs full rows; the log-prob pass still shares."""
    trainer = _trainer(env, True, param_offload=True)
    assert trainer.fsdp in ("fsdp2", "fsdp1")
    batch = _batch(trainer.model.config.vocab_size)
    rows = list(range(len(RESPONSES)))
    with torch.no_grad():
        trainer._forward(trainer.model, batch, rows)
    assert prefix_calls == [SYSTEM]
    log_probs, _ = trainer._forward(trainer.model, batch, rows, with_entropy=False)
    log_probs.sum().backward()
    assert prefix_calls == [SYSTEM]
