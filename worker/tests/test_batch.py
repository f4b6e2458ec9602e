"""Batch validation, mini-batches of whole prompts, and the token-budget micro-batch plan."""

import pytest
import torch
from safetensors.torch import save_file

from agentrl_worker.algos import agg_loss, agg_loss_numerator
from agentrl_worker.batch import load_batch, mini_batches, plan_micro_batches, sequence_lengths
from agentrl_worker.config import ConfigError, WorkerConfig


def good_batch():
    return {
        "input_ids": torch.tensor([[1, 2, 3, 0], [1, 2, 0, 0]]),
        "attention_mask": torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]]),
        "response_mask": torch.tensor([[0, 1, 1, 0], [0, 1, 0, 0]]),
        "rewards": torch.tensor([1.0, 0.0]),
        "group_ids": torch.tensor([0, 0]),
    }


def test_load_batch_accepts_the_documented_tensors(tmp_path):
    save_file(good_batch(), str(tmp_path / "b.safetensors"))
    assert set(load_batch(str(tmp_path / "b.safetensors"))) == set(good_batch())


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda b: b.pop("response_mask"), "missing tensor response_mask"),
        (lambda b: b.update(rewards=torch.tensor([1.0, 0.0, 2.0])), "rewards has shape"),
        (lambda b: b.update(group_ids=torch.tensor([0, 0], dtype=torch.int32)), "group_ids has dtype"),
        (lambda b: b.update(advantages=torch.zeros(2)), "unknown tensor advantages"),
        (lambda b: b["response_mask"].__setitem__((1, 3), 1), "response_mask is 1 where attention_mask is 0"),
        (lambda b: b["response_mask"].__setitem__((0, 0), 1), "position 0"),
    ],
)
def test_load_batch_names_the_bad_tensor(tmp_path, change, message):
    batch = good_batch()
    change(batch)
    save_file(batch, str(tmp_path / "b.safetensors"))
    with pytest.raises(ConfigError, match=message):
        load_batch(str(tmp_path / "b.safetensors"))


def test_sequence_lengths_drop_right_padding_only():
    assert sequence_lengths(torch.tensor([[1, 1, 0], [0, 1, 1], [1, 0, 0]])) == [2, 3, 1]


def test_mini_batches_hold_whole_prompts_in_order_of_first_appearance():
    groups = torch.tensor([7, 7, 3, 3, 9, 9, 7])
    assert mini_batches(groups, 2) == [[0, 1, 6, 2, 3], [4, 5]]
    assert mini_batches(groups, None) == [[0, 1, 6, 2, 3, 4, 5]]


def test_plan_balances_ranks_and_respects_the_budget():
    lengths = [10, 9, 8, 3, 3, 2]
    plan = plan_micro_batches(list(range(6)), lengths, world_size=2, token_budget=20)
    # longest first to the lighter rank: 10->r0, 9->r1, 8->r1 (17 vs 10), 3->r0 (13), 3->r0 (16), 2->r0 (18 vs 17)
    assert sorted(sum(plan.per_rank[0], [])) == [0, 3, 4, 5] and sorted(sum(plan.per_rank[1], [])) == [1, 2]
    # packing, padded size = rows x longest: r0 [10, 3] (2 x 10 = 20), then 3 more would be 30, so [3, 2];
    # r1 [9, 8] (18), then an empty micro-batch to match r0's two.
    assert plan.per_rank[0] == [[0, 3], [4, 5]] and plan.per_rank[1] == [[1, 2]] + [[]]
    for bins in plan.per_rank:
        for micro in bins:
            assert not micro or len(micro) * max(lengths[r] for r in micro) <= 20
    # every rank runs the same number of micro-batches (FSDP collectives), padding with empty ones
    assert len(plan.per_rank[0]) == len(plan.per_rank[1])


def test_plan_gives_an_over_budget_row_its_own_micro_batch_and_empty_ones_to_idle_ranks():
    plan = plan_micro_batches([0], [50], world_size=2, token_budget=8)
    assert plan.per_rank == [[[0]], [[]]]


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"])
def test_split_numerators_over_the_global_count_equal_agg_loss(mode):
    # The worker sums numerators over micro-batches and ranks, then divides by the mini-batch's count.
    loss = torch.randn(6, 5)
    mask = (torch.rand(6, 5) > 0.4).int()
    mask[2] = 0
    whole = agg_loss(loss, mask, mode)
    parts = agg_loss_numerator(loss[:2], mask[:2], mode) + agg_loss_numerator(loss[2:], mask[2:], mode)
    count = mask.sum() if mode == "token-mean" else (mask.sum(-1) > 0).sum()
    assert torch.allclose(parts / count, whole, atol=1e-6)


def test_config_refuses_unknown_keys_bad_types_and_bad_choices():
    with pytest.raises(ConfigError, match="unknown field"):
        WorkerConfig.from_dict({"model_path": "m", "lr_rate": 1})
    with pytest.raises(ConfigError, match="lr must be float"):
        WorkerConfig.from_dict({"model_path": "m", "lr": "big"})
    with pytest.raises(ConfigError, match="loss_agg_mode"):
        WorkerConfig.from_dict({"model_path": "m", "loss_agg_mode": "token-sum"})
    with pytest.raises(ConfigError, match="use_ref"):
        WorkerConfig.from_dict({"model_path": "m", "use_kl_loss": True})
    config = WorkerConfig.from_dict({"model_path": "m", "lr": 1, "ppo_mini_batch_size": None})
    assert config.lr == 1 and config.kl_loss_type == "low_var_kl" and config.clip_ratio_high == 0.2
