"""Batch validation, mini-batches of whole prompts, episodes' advantages, and the token-budget micro-batch plan."""

from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file

from agentrl_worker.algos import LOSS_AGG_MODES, agg_loss, agg_norm
from agentrl_worker.batch import load_batch, mini_batches, pack_rows, plan_micro_batches, sequence_lengths
from agentrl_worker.config import ConfigError, WorkerConfig
from agentrl_worker.trainer import Trainer


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
    save_file({**good_batch(), "episode_ids": torch.tensor([4, 4])}, str(tmp_path / "e.safetensors"))
    assert load_batch(str(tmp_path / "e.safetensors"))["episode_ids"].tolist() == [4, 4]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda b: b.pop("response_mask"), "missing tensor response_mask"),
        (lambda b: b.update(rewards=torch.tensor([1.0, 0.0, 2.0])), "rewards has shape"),
        (lambda b: b.update(group_ids=torch.tensor([0, 0], dtype=torch.int32)), "group_ids has dtype"),
        (lambda b: b.update(advantages=torch.zeros(2)), "unknown tensor advantages"),
        (lambda b: b.update(episode_ids=torch.tensor([0.0, 1.0])), "episode_ids has dtype"),
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


def test_shuffled_mini_batches_have_the_same_sizes_but_rows_drawn_across_groups():
    groups = torch.arange(8).repeat_interleave(4)  # 8 prompts x 4 samples, 2 prompts per mini-batch
    whole = mini_batches(groups, 2)
    drawn = [mini_batches(groups, 2, torch.Generator().manual_seed(seed)) for seed in (1, 1, 2)]
    assert [len(b) for b in drawn[0]] == [len(b) for b in whole] == [8, 8, 8, 8]
    assert sorted(sum(drawn[0], [])) == list(range(32))  # every row once
    assert drawn[0] == drawn[1] and drawn[0] != drawn[2]  # seeded
    # Whole groups put 2 prompts in each mini-batch; drawn at random, a mini-batch holds rows of more prompts.
    assert max(len(set(groups[b].tolist())) for b in drawn[0]) > 2


def test_update_advantages_follow_the_batch_episodes():
    # The trainer's choice of estimator, over a group with one episode cut into rows 0 and 1.
    batch = {"rewards": torch.tensor([1.0, 1.0, 0.0]), "group_ids": torch.tensor([0, 0, 0])}
    cut = {**batch, "episode_ids": torch.tensor([2, 2, 1])}
    # Per episode the group is [1, 0] (rewards of rows 0 and 2), as in test_algos.
    grpo, dr_grpo, rloo = 0.5 / (0.5**0.5 + 1e-6), 0.5, 1.0
    for raw, first in [({}, grpo), ({"norm_adv_by_std_in_grpo": False}, dr_grpo), ({"adv_estimator": "rloo"}, rloo)]:
        trainer = SimpleNamespace(config=WorkerConfig.from_dict({"model_path": "unused", **raw}))
        assert Trainer._advantages(trainer, cut).tolist() == pytest.approx([first, first, -first])
        assert Trainer._advantages(trainer, batch)[0] != pytest.approx(first)  # without episodes, each row counts
    with pytest.raises(ConfigError, match="update: episode 2"):
        Trainer._advantages(trainer, {**batch, "episode_ids": torch.tensor([2, 2, 2])})


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


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_micro_batches_of_the_plan_over_the_global_norm_sum_to_agg_loss(mode):
    # The worker divides each micro-batch of every rank by the mini-batch's agg_norm, then sums (gradient accumulation
    # and FSDP's rank average times the world size): the result is agg_loss of the whole mini-batch.
    gen = torch.Generator().manual_seed(0)
    loss = torch.randn(6, 5, generator=gen)
    mask = (torch.rand(6, 5, generator=gen) > 0.4).int()
    mask[2] = 0
    lengths = [5, 4, 5, 3, 2, 5]
    plan = plan_micro_batches(list(range(6)), lengths, world_size=2, token_budget=8)
    assert sum(len(bins) for bins in plan.per_rank) > 2  # really cut
    whole = agg_loss(loss, mask, mode, loss_scale_factor=16)
    norm = agg_norm(mask, mode, loss_scale_factor=16)
    parts = [agg_loss(loss[micro], mask[micro], mode, 16, norm) for bins in plan.per_rank for micro in bins if micro]
    assert torch.allclose(sum(parts), whole, atol=1e-6)


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


def test_config_sum_norm_length_is_the_scale_factor_else_the_max_response_length():
    sum_norm = {"model_path": "m", "loss_agg_mode": "seq-mean-token-sum-norm"}
    with pytest.raises(ConfigError, match="max_response_length"):
        WorkerConfig.from_dict(sum_norm)
    assert WorkerConfig.from_dict({**sum_norm, "max_response_length": 512}).sum_norm_length() == 512.0
    assert WorkerConfig.from_dict({**sum_norm, "max_response_length": 512, "loss_scale_factor": 300}).sum_norm_length() == 300.0
    assert WorkerConfig.from_dict({**sum_norm, "loss_scale_factor": 300}).sum_norm_length() == 300.0
    with pytest.raises(ConfigError, match="max_response_length must be > 0"):
        WorkerConfig.from_dict({**sum_norm, "max_response_length": 0})
    with pytest.raises(ConfigError, match="max_response_length must be int"):
        WorkerConfig.from_dict({**sum_norm, "max_response_length": 1.5})
    # the other modes do not need it
    assert WorkerConfig.from_dict({"model_path": "m"}).sum_norm_length() is None


def test_packed_plan_counts_tokens_without_padding_first_fit():
    # lengths 90, 60, 40, 30, 10 within 100 tokens: padded, 90 fills a micro-batch alone and 60+40 would count 2x60;
    # packed, 10 joins 90 and 30 joins 60 (first fit, longest first), 40 opens the third.
    lengths = [90, 60, 40, 30, 10]
    padded = plan_micro_batches(list(range(5)), lengths, 1, 100)
    packed = plan_micro_batches(list(range(5)), lengths, 1, 100, packed=True)
    assert padded.per_rank == [[[0], [1], [2, 3], [4]]]
    assert packed.per_rank == [[[0, 4], [1, 2], [3]]]
    for bins in packed.per_rank:
        assert all(sum(lengths[r] for r in b) <= 100 for b in bins)
    # a row longer than the budget still runs, alone
    assert plan_micro_batches([0, 1], [150, 20], 1, 100, packed=True).per_rank == [[[0], [1]]]


def test_pack_rows_drops_padding_restarts_positions_and_finds_the_predicted_response_tokens():
    input_ids = torch.tensor([[5, 6, 7, 0], [0, 8, 9, 4]])  # right-padded, then left-padded
    attention = torch.tensor([[1, 1, 1, 0], [0, 1, 1, 1]])
    response = torch.tensor([[0, 1, 1, 0], [0, 0, 1, 1]])
    packed = pack_rows(input_ids, attention, response)
    assert packed.input_ids.tolist() == [[5, 6, 7, 8, 9, 4]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 0, 1, 2]]
    assert packed.row.tolist() == [0, 0, 0, 1, 1, 1] and packed.col.tolist() == [0, 1, 2, 1, 2, 3]
    assert packed.targets.tolist() == [1, 2, 4, 5]
