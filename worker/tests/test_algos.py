"""Hand-computed checks of agentrl_worker.algos; the comments derive each expected number."""

import math

import pytest
import torch

from agentrl_worker.algos import (
    LOSS_AGG_MODES,
    agg_loss,
    agg_norm,
    episode_advantages,
    grpo_advantages,
    head_log_probs,
    kl_penalty,
    log_probs_and_entropy,
    token_log_probs,
    policy_loss,
    response_turn_classes,
    rloo_advantages,
)

EPS = 1e-6


def close(actual, expected, tol=1e-6):
    assert torch.allclose(torch.as_tensor(actual, dtype=torch.float32), torch.tensor(expected, dtype=torch.float32), atol=tol), (actual, expected)


# --- GRPO -------------------------------------------------------------------------------------------------------

def test_grpo_normalises_by_unbiased_std_per_group():
    # group a: [1, 2, 3] -> mean 2, unbiased std 1 -> [-1, 0, 1] / (1 + eps)
    # group b: [1, 0, 1, 0] -> mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = sqrt(1/3)
    scores = torch.tensor([1.0, 1.0, 2.0, 0.0, 3.0, 1.0, 0.0])
    groups = ["a", "b", "a", "b", "a", "b", "b"]
    s = math.sqrt(1 / 3)
    expected = [-1 / (1 + EPS), 0.5 / (s + EPS), 0.0, -0.5 / (s + EPS), 1 / (1 + EPS), 0.5 / (s + EPS), -0.5 / (s + EPS)]
    close(grpo_advantages(scores, groups), expected)


def test_grpo_accepts_tensor_group_ids_and_dr_grpo_skips_the_std():
    scores = torch.tensor([1.0, 2.0, 3.0, 10.0, 20.0])
    groups = torch.tensor([7, 7, 7, 3, 3])
    # Dr.GRPO: r - group mean -> [-1, 0, 1] and [-5, 5]
    close(grpo_advantages(scores, groups, norm_by_std=False), [-1.0, 0.0, 1.0, -5.0, 5.0])


def test_grpo_all_equal_group_gets_zero():
    close(grpo_advantages(torch.tensor([0.7, 0.7, 0.7]), [0, 0, 0]), [0.0, 0.0, 0.0])


def test_grpo_group_of_one_uses_mean_zero_std_one():
    # mu = 0, sigma = 1 -> A = r / (1 + eps), not 0
    close(grpo_advantages(torch.tensor([5.0, 1.0, 3.0]), [0, 1, 1]), [5.0 / (1 + EPS), -1 / (math.sqrt(2) + EPS), 1 / (math.sqrt(2) + EPS)])


# --- RLOO -------------------------------------------------------------------------------------------------------

def test_rloo_is_reward_minus_mean_of_the_others():
    # [1, 2, 3]: 1 - 2.5, 2 - 2, 3 - 1.5; singleton [4] -> 4
    close(rloo_advantages(torch.tensor([1.0, 2.0, 3.0, 4.0]), [0, 0, 0, 1]), [-1.5, 0.0, 1.5, 4.0])


def test_rloo_all_equal_group_gets_zero():
    close(rloo_advantages(torch.tensor([2.0, 2.0]), [0, 0]), [0.0, 0.0])


# --- episodes of several rows -----------------------------------------------------------------------------------

ESTIMATORS = {
    "grpo": grpo_advantages,
    "dr_grpo": lambda scores, groups: grpo_advantages(scores, groups, norm_by_std=False),
    "rloo": rloo_advantages,
}


@pytest.mark.parametrize("name", ESTIMATORS)
def test_an_episode_split_into_rows_gets_the_advantage_it_gets_as_one_row(name):
    estimator = ESTIMATORS[name]
    # Episodes a..e (scores 1, 0, 0.5 in group 0; 2, 1 in group 1), each one row...
    whole = estimator(torch.tensor([1.0, 0.0, 0.5, 2.0, 1.0]), [0, 0, 0, 1, 1])
    # ...then a cut into 2 rows and d into 3, interleaved with the others.
    episodes = ["a", "a", "b", "c", "d", "e", "d", "d"]
    at = {"a": 0, "b": 1, "c": 2, "d": 3, "e": 4}
    scores = torch.tensor([1.0, 1.0, 0.0, 0.5, 2.0, 1.0, 2.0, 2.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    split = episode_advantages(scores, groups, episodes, estimator)
    assert torch.equal(split, whole[[at[e] for e in episodes]])


@pytest.mark.parametrize(
    "name, first, second",
    [
        # Per episode the group is [1, 0]: mean 0.5, unbiased std sqrt(0.5). Counting the rows [1, 1, 0] instead
        # would give mean 2/3 and other numbers.
        ("grpo", 0.5 / (math.sqrt(0.5) + EPS), -0.5 / (math.sqrt(0.5) + EPS)),
        ("dr_grpo", 0.5, -0.5),
        ("rloo", 1.0, -1.0),  # 1 - 0 and 0 - 1; counting rows, the first row would get 1 - mean(1, 0) = 0.5
    ],
)
def test_episode_advantages_count_each_episode_once_in_its_group(name, first, second):
    advantages = episode_advantages(torch.tensor([1.0, 1.0, 0.0]), [0, 0, 0], torch.tensor([7, 7, 3]), ESTIMATORS[name])
    close(advantages, [first, first, second])


@pytest.mark.parametrize("name", ESTIMATORS)
def test_episode_advantages_without_episodes_are_the_estimators_own(name):
    estimator = ESTIMATORS[name]
    scores, groups = torch.tensor([1.0, 2.0, 3.0, 4.0, 0.5]), torch.tensor([0, 0, 1, 0, 1])
    alone = estimator(scores, groups)
    assert torch.equal(episode_advantages(scores, groups, None, estimator), alone)
    assert torch.equal(episode_advantages(scores, groups, torch.tensor([4, 3, 2, 1, 0]), estimator), alone)


@pytest.mark.parametrize("scores, groups", [([1.0, 1.0], [0, 1]), ([1.0, 0.0], [0, 0])])
def test_episode_advantages_refuse_an_episode_whose_rows_disagree(scores, groups):
    with pytest.raises(ValueError, match="episode 5: rows 0 and 1 differ"):
        episode_advantages(torch.tensor(scores), groups, [5, 5], grpo_advantages)


# --- agg_loss ---------------------------------------------------------------------------------------------------

LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
MASK = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])  # the last row is fully masked


@pytest.mark.parametrize(
    "mode, expected, norm",
    [
        ("token-mean", 7 / 3, 3),  # (1 + 2 + 4) / 3 tokens
        ("seq-mean-token-sum", 3.5, 2),  # rows 3 and 4, the masked row ignored
        ("seq-mean-token-mean", 2.75, 2),  # rows 1.5 and 4
        ("seq-mean-token-sum-norm", 7 / 6, 6),  # Dr.GRPO: mean over the 2 sequences of (row sum / L), L = 3: 3.5 / 3
    ],
)
def test_agg_loss_modes(mode, expected, norm):
    # L = 3 is only read by seq-mean-token-sum-norm
    close(agg_loss(LOSS, MASK, mode, loss_scale_factor=3), expected)
    assert agg_norm(MASK, mode, loss_scale_factor=3) == norm


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"])
def test_agg_loss_only_sum_norm_reads_the_scale_factor(mode):
    assert agg_loss(LOSS, MASK, mode, loss_scale_factor=100).item() == agg_loss(LOSS, MASK, mode).item()


def test_agg_loss_sum_norm_uses_the_scale_factor():
    # rows sum to 3 and 4: mean 3.5, / 7
    close(agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", loss_scale_factor=7), 0.5)


def test_agg_loss_sum_norm_needs_a_constant_and_ignores_the_padding_width():
    # No default from the tensor's width or the longest response: a constant must be given.
    with pytest.raises(ValueError, match="loss_scale_factor"):
        agg_loss(LOSS, MASK, "seq-mean-token-sum-norm")
    padded_loss = torch.cat([LOSS, torch.full((3, 5), 50.0)], dim=1)
    padded_mask = torch.cat([MASK, torch.zeros(3, 5, dtype=MASK.dtype)], dim=1)
    assert agg_loss(padded_loss, padded_mask, "seq-mean-token-sum-norm", 4).item() == agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", 4).item()


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_agg_loss_fully_masked_batch_is_zero_not_nan(mode):
    out = agg_loss(LOSS, torch.zeros_like(MASK), mode, loss_scale_factor=3)
    assert out.item() == 0.0


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_agg_loss_with_the_global_norm_sums_over_micro_batches(mode):
    # What the worker does: every micro-batch, trimmed to its own width, is divided by the whole mini-batch's norm
    # (agg_norm of its mask), so the parts add up to agg_loss of the mini-batch in one go.
    gen = torch.Generator().manual_seed(0)
    loss = torch.randn(7, 6, generator=gen)
    mask = (torch.rand(7, 6, generator=gen) > 0.4).int()
    mask[2] = 0  # a fully masked row
    mask[3:5, 4:] = 0  # rows 3-4 are shorter: their micro-batch is trimmed to 4 columns
    whole = agg_loss(loss, mask, mode, loss_scale_factor=5)
    norm = agg_norm(mask, mode, loss_scale_factor=5)
    cuts = ((0, 2, 6), (2, 5, 4), (5, 7, 6))
    parts = [agg_loss(loss[a:b, :w], mask[a:b, :w], mode, 5, norm) for a, b, w in cuts]
    close(sum(parts), whole.item(), 1e-5)
    # ...and without the global norm each part would be normalised on its own, which differs.
    alone = sum(agg_loss(loss[a:b, :w], mask[a:b, :w], mode, 5) for a, b, w in cuts)
    assert abs(alone.item() - whole.item()) > 1e-3


def test_agg_loss_rejects_unknown_mode():
    with pytest.raises(ValueError, match="loss_agg_mode"):
        agg_loss(LOSS, MASK, "token-sum")


# --- policy_loss ------------------------------------------------------------------------------------------------

def test_policy_loss_clip_and_dual_clip_by_hand():
    # tokens: (A, rho) = (1, 1.5), (-1, 1.5), (-1, 4), (1, 0.5), plus a masked token with a huge ratio.
    # (1, 1.5):  L1 = -1.5, L2 = -1.2 -> Lc = -1.2, clipped (L2 > L1)
    # (-1, 1.5): L1 = 1.5, L2 = 1.2 -> Lc = 1.5; L3 = 3 -> min = 1.5
    # (-1, 4):   L1 = 4, L2 = 1.2 -> Lc = 4 > L3 = 3 -> 3, dual-clipped (lower)
    # (1, 0.5):  L1 = -0.5, L2 = -0.8 -> Lc = -0.5
    # token-mean over 4 tokens: (-1.2 + 1.5 + 3 - 0.5) / 4 = 0.7
    ratios = torch.tensor([[1.5, 1.5, 4.0, 0.5, 100.0]])
    old = torch.full_like(ratios, -2.0)
    logp = old + torch.log(ratios)
    adv = torch.tensor([[1.0, -1.0, -1.0, 1.0, 1.0]])
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    loss, metrics = policy_loss(logp, old, adv, mask)
    close(loss, 0.7, 1e-5)
    close(metrics["pg_clipfrac"], 0.25, 1e-5)
    close(metrics["pg_clipfrac_lower"], 0.25, 1e-5)
    close(metrics["ppo_kl"], -(2 * math.log(1.5) + math.log(4) + math.log(0.5)) / 4, 1e-5)


def test_policy_loss_clip_higher_and_sequence_advantages():
    # clip_ratio_high 0.28: (A=2, rho=1.5) -> L2 = -2 * 1.28 = -2.56 (> L1 = -3)
    logp = torch.log(torch.tensor([[1.5, 1.0]]))
    old = torch.zeros_like(logp)
    loss, metrics = policy_loss(logp, old, torch.tensor([2.0]), torch.tensor([[1, 0]]), clip_ratio_high=0.28)
    close(loss, -2.56, 1e-5)
    close(metrics["pg_clipfrac"], 1.0, 1e-5)


def test_policy_loss_on_policy_ratio_is_one():
    logp = torch.randn(3, 5)
    loss, metrics = policy_loss(logp, logp.clone(), torch.tensor([1.0, -0.5, 2.0]), torch.ones(3, 5))
    # rho = 1 everywhere: loss = -mean(A) over tokens = -(1 - 0.5 + 2) / 3
    close(loss, -2.5 / 3, 1e-6)
    assert metrics["ppo_kl"].item() == 0.0 and metrics["pg_clipfrac"].item() == 0.0


def test_policy_loss_rollout_is_weights_scale_token_losses():
    logp = torch.zeros(1, 2)
    loss, _ = policy_loss(logp, logp, torch.tensor([1.0]), torch.ones(1, 2), rollout_is_weights=torch.tensor([[0.5, 2.0]]))
    close(loss, -(0.5 + 2.0) / 2)


def test_policy_loss_rejects_dual_clip_below_one():
    with pytest.raises(ValueError, match="clip_ratio_c"):
        policy_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1), torch.ones(1, 1), clip_ratio_c=1.0)


def test_policy_loss_parts_with_global_norm_and_tokens_add_up_to_the_whole():
    # The worker's micro-batches: loss and token metrics divided by the whole mini-batch's norm and token count.
    gen = torch.Generator().manual_seed(1)
    old = -torch.rand(5, 4, generator=gen) * 3
    logp = old + torch.randn(5, 4, generator=gen) * 0.5
    adv = torch.tensor([1.0, -1.0, 0.5, -2.0, 0.0])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [0, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 1]])
    for mode in LOSS_AGG_MODES:
        whole, whole_metrics = policy_loss(logp, old, adv, mask, loss_agg_mode=mode, loss_scale_factor=4, clip_ratio_c=1.5)
        norm, tokens = agg_norm(mask, mode, 4), float(mask.sum())
        parts = [
            policy_loss(logp[a:b], old[a:b], adv[a:b], mask[a:b], loss_agg_mode=mode, loss_scale_factor=4, clip_ratio_c=1.5,
                        global_norm=norm, global_tokens=tokens)
            for a, b in ((0, 2), (2, 5))
        ]
        close(parts[0][0] + parts[1][0], whole.item(), 1e-5)
        for name in ("pg_clipfrac", "pg_clipfrac_lower", "ppo_kl"):
            close(parts[0][1][name] + parts[1][1][name], whole_metrics[name].item(), 1e-5)
    # the clip and the dual clip both fire on this data, so the metrics above are not all zero
    assert 0 < whole_metrics["pg_clipfrac"].item() < 1 and whole_metrics["pg_clipfrac_lower"].item() > 0
    ratio = torch.exp(logp - old)[mask == 1]
    assert whole_metrics["ratio_max"].item() == pytest.approx(ratio.max().item())
    assert whole_metrics["ratio_min"].item() == pytest.approx(ratio.min().item())


# --- response turn classes --------------------------------------------------------------------------------------

def test_response_turn_classes_from_the_mask_alone():
    mask = torch.tensor([
        [0, 1, 1, 0, 0, 1, 1, 1, 0],  # a tool call (2 tokens), a tool response, an answer (3 tokens), padding
        [0, 0, 1, 1, 1, 0, 0, 0, 0],  # one turn: it is the final turn, no tool turns
        [0, 1, 0, 1, 1, 0, 1, 0, 0],  # three turns, the first of one token
        [0, 0, 0, 0, 0, 0, 0, 0, 0],  # no response at all
    ])
    classes = response_turn_classes(mask)
    assert classes["turn_start"].int().tolist() == [
        [0, 1, 0, 0, 0, 1, 0, 0, 0],
        [0, 0, 1, 0, 0, 0, 0, 0, 0],
        [0, 1, 0, 1, 0, 0, 1, 0, 0],
        [0] * 9,
    ]
    assert classes["final_turn"].int().tolist() == [
        [0, 0, 0, 0, 0, 1, 1, 1, 0],
        [0, 0, 1, 1, 1, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 1, 0, 0],
        [0] * 9,
    ]
    assert classes["tool_turns"].int().tolist() == [
        [0, 1, 1, 0, 0, 0, 0, 0, 0],
        [0] * 9,
        [0, 1, 0, 1, 1, 0, 0, 0, 0],
        [0] * 9,
    ]
    for positions in classes.values():
        assert positions.dtype == torch.bool


# --- kl_penalty -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "kinds, expected",
    [
        (("k1", "kl"), [1.0, -1.0]),
        (("abs",), [1.0, 1.0]),
        (("k2", "mse"), [0.5, 0.5]),
        # x = ref - logp: -1 -> e^-1 + 1 - 1; 1 -> e - 2
        (("k3", "low_var_kl"), [math.exp(-1), math.e - 2]),
    ],
)
def test_kl_penalty_by_hand(kinds, expected):
    logp = torch.tensor([-1.0, -2.0])
    ref = torch.tensor([-2.0, -1.0])
    for kind in kinds:
        close(kl_penalty(logp, ref, kind), expected, 1e-6)


def test_kl_penalty_low_var_kl_clamps():
    # x = ref - logp = 30 -> clamped to 20 -> e^20 - 21 -> clamped to 10
    out = kl_penalty(torch.tensor([-30.0]), torch.tensor([0.0]), "low_var_kl")
    assert out.item() == 10.0
    # equal inputs give exactly 0 for every kind
    for kind in ("k1", "abs", "k2", "k3"):
        assert kl_penalty(torch.tensor([-0.3]), torch.tensor([-0.3]), kind).item() == 0.0


def test_kl_penalty_rejects_unknown_kind():
    with pytest.raises(ValueError, match="kl_loss_type"):
        kl_penalty(torch.zeros(1), torch.zeros(1), "full")


# --- log-probs --------------------------------------------------------------------------------------------------

def _head_inputs(tokens=37, hidden=16, vocab=301, bias=True):
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(tokens, hidden, generator=gen, requires_grad=True)
    w = torch.randn(vocab, hidden, generator=gen).mul_(0.5).requires_grad_()
    b = torch.randn(vocab, generator=gen).requires_grad_() if bias else None
    labels = torch.randint(0, vocab, (tokens,), generator=gen)
    return h, w, b, labels


@pytest.mark.parametrize("chunk", [1, 8, 10, 37, 4096])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_head_log_probs_in_chunks_equals_the_whole_logits_values_and_gradients(chunk, temperature):
    h, w, b, labels = _head_inputs()
    # The reference: the whole [N, V] logits at once, as the trainer computed them before chunking.
    lp_full, ent_full = log_probs_and_entropy(torch.nn.functional.linear(h, w, b), labels, temperature)
    coeffs = torch.linspace(-1.0, 1.0, labels.shape[0])
    full_grads = torch.autograd.grad((lp_full * coeffs).sum() + (ent_full * coeffs.flip(0)).sum(), (h, w, b))
    lp, ent = head_log_probs(h, w, labels, temperature, chunk_tokens=chunk, bias=b)
    grads = torch.autograd.grad((lp * coeffs).sum() + (ent * coeffs.flip(0)).sum(), (h, w, b))
    assert torch.allclose(lp, lp_full, atol=1e-5, rtol=0) and torch.allclose(ent, ent_full, atol=1e-5, rtol=0)
    for got, want in zip(grads, full_grads):
        assert want.abs().max() > 1e-3
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), (got - want).abs().max()


def test_head_log_probs_without_entropy_gives_the_same_log_probs_and_no_entropy():
    h, w, _, labels = _head_inputs(bias=False)
    with torch.no_grad():
        lp, ent = head_log_probs(h, w, labels, 0.9, chunk_tokens=5, with_entropy=False)
        whole = token_log_probs(torch.nn.functional.linear(h, w), labels, 0.9)
    assert ent is None and torch.allclose(lp, whole, atol=1e-6, rtol=0)


def test_head_log_probs_with_gradients_recomputes_chunks_instead_of_keeping_their_logits():
    h, w, _, labels = _head_inputs(tokens=64, hidden=8, vocab=1000, bias=False)  # the weight is smaller than a chunk's logits
    saved: list[int] = []

    def pack(t):
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        head_log_probs(h, w, labels, chunk_tokens=16)
    # Checkpointed chunks keep their inputs, never a [chunk, V] tensor; unchunked autograd would keep several [N, V].
    assert saved and max(saved) < 16 * 1000
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        log_probs_and_entropy(torch.nn.functional.linear(h, w), labels)
    assert max(saved) >= 64 * 1000


def test_head_log_probs_rejects_a_chunk_below_one():
    h, w, _, labels = _head_inputs(bias=False)
    with pytest.raises(ValueError, match="chunk_tokens"):
        head_log_probs(h, w, labels, chunk_tokens=0)


def test_log_probs_use_the_temperature():
    # logits [0, ln 3] at temperature 1: p = [1/4, 3/4]; at temperature 2: logits/2 = [0, ln sqrt 3]
    logits = torch.tensor([[0.0, math.log(3.0)]])
    labels = torch.tensor([1])
    lp1, ent1 = log_probs_and_entropy(logits, labels, 1.0)
    close(lp1, [math.log(0.75)])
    close(ent1, [-(0.25 * math.log(0.25) + 0.75 * math.log(0.75))])
    lp2, _ = log_probs_and_entropy(logits, labels, 2.0)
    r3 = math.sqrt(3.0)
    close(lp2, [math.log(r3 / (1 + r3))])


def test_token_log_probs_matches_the_entropy_variant():
    logits = torch.randn(3, 4, 50)
    labels = torch.randint(0, 50, (3, 4))
    # bit for bit: compute_log_probs uses one, a training step without entropy the other
    for temperature in (1.0, 0.7):
        assert torch.equal(token_log_probs(logits, labels, temperature), log_probs_and_entropy(logits, labels, temperature)[0])


def test_truncated_is_weights_clip_at_the_threshold_on_masked_tokens_and_report_the_untruncated_stats():
    from agentrl_worker.algos import rollout_is_weights

    old = torch.log(torch.tensor([[0.5, 0.9, 0.2, 0.3]]))
    rollout = torch.log(torch.tensor([[0.25, 0.9, 0.4, 0.01]]))
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # the last token is not trained on: weight 0, left out of the stats
    weights, stats = rollout_is_weights(old, rollout, 1.5, mask)
    torch.testing.assert_close(weights, torch.tensor([[1.5, 1.0, 0.5, 0.0]]))
    assert stats["rollout_is/max"] == pytest.approx(2.0)
    assert stats["rollout_is/mean"] == pytest.approx((2.0 + 1.0 + 0.5) / 3)
    assert stats["rollout_is/clipped_frac"] == pytest.approx(1 / 3)
    # mask mode: the token above the threshold leaves the loss instead of being capped; the others keep their weight
    masked, masked_stats = rollout_is_weights(old, rollout, 1.5, mask, mode="mask")
    torch.testing.assert_close(masked, torch.tensor([[0.0, 1.0, 0.5, 0.0]]))
    assert masked_stats == stats


def _areal_decoupled_ppo_loss(logprobs, proximal_logprobs, old_logprobs, advantages, eps_clip, loss_mask, behav_imp_weight_cap):
    """AReaL's decoupled PPO actor loss (areal/utils/functional.py ppo_actor_loss_fn, token level, no dual clip),
    written out from its formula: the clipped ratio is taken against the proximal policy (the trainer's recomputed
    log-probs), then multiplied by the behaviour importance weight exp(proximal - old), where old are the inference
    engine's log-probs; tokens whose weight exceeds behav_imp_weight_cap get weight 0; the sum is divided by the
    number of loss tokens (the capped tokens included)."""
    loss_mask = loss_mask.bool()
    count = loss_mask.count_nonzero() or 1
    ratio = torch.where(loss_mask, torch.exp(logprobs - proximal_logprobs), 0)
    clipped = torch.clamp(ratio, 1.0 - eps_clip, 1.0 + eps_clip)
    pg_loss = torch.max(-advantages * ratio, -advantages * clipped)
    behav_imp_weight = (proximal_logprobs - old_logprobs).exp()
    behav_mask = (behav_imp_weight <= behav_imp_weight_cap).logical_and(loss_mask)
    pg_loss = pg_loss * torch.where(behav_mask, behav_imp_weight, 0.0)
    return torch.where(loss_mask, pg_loss, 0).sum() / count


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mask_mode_is_areals_decoupled_ppo_loss_and_its_gradient(seed):
    from agentrl_worker.algos import policy_loss, rollout_is_weights

    generator = torch.Generator().manual_seed(seed)
    shape = (4, 12)
    proximal = -torch.rand(shape, generator=generator) * 3  # the trainer's recomputed old log-probs
    behaviour = proximal + torch.randn(shape, generator=generator) * 0.7  # a stale engine's
    logprobs = (proximal + torch.randn(shape, generator=generator) * 0.3).requires_grad_(True)
    advantages = torch.randn(shape, generator=generator)
    mask = (torch.rand(shape, generator=generator) > 0.2).float()
    cap = 2.0
    weights, stats = rollout_is_weights(proximal, behaviour, cap, mask, mode="mask")
    assert 0 < stats["rollout_is/clipped_frac"] < 1  # some tokens are masked, so the comparison tests the cap
    ours, _ = policy_loss(logprobs, proximal, advantages, mask, clip_ratio_c=1e9, loss_agg_mode="token-mean", rollout_is_weights=weights)
    (ours_grad,) = torch.autograd.grad(ours, logprobs)
    reference = _areal_decoupled_ppo_loss(logprobs, proximal, behaviour, advantages, 0.2, mask, cap)
    (reference_grad,) = torch.autograd.grad(reference, logprobs)
    torch.testing.assert_close(ours, reference, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(ours_grad, reference_grad, rtol=1e-6, atol=1e-7)


def test_gspo_carries_each_sequences_ratio_to_its_tokens_with_their_own_gradients():
    """GSPO (loss_mode gspo): the loss is the mean over sequences of -A_i * s_i, s_i = exp(mean of the sequence's
    log-ratios), and each token's gradient is -A_i * s_i / (its sequence's tokens) / (sequences): the paper's GSPO-token
    gradient. A sequence whose ratio is clipped gets none."""
    torch.manual_seed(0)
    old = torch.randn(3, 5, dtype=torch.float64) * 0.1 - 1
    # Each sequence's tokens drift by their own noise around +0.05, +0.05 and -0.05: ratios above, above, below 1.
    drift = torch.tensor([[0.05], [0.05], [-0.05]], dtype=torch.float64) + torch.randn(3, 5, dtype=torch.float64) * 0.005
    log_prob = (old + drift).requires_grad_(True)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 1, 1, 0, 0]], dtype=torch.float64)
    advantages = torch.tensor([1.0, -0.5, 2.0], dtype=torch.float64)
    tokens = mask.sum(-1)
    ratio = torch.exp(((log_prob.detach() - old) * mask).sum(-1) / tokens)

    loss, metrics = policy_loss(log_prob, old, advantages, mask, 0.5, 0.5, 3.0, "seq-mean-token-mean", loss_mode="gspo")
    assert loss.item() == pytest.approx((-(advantages * ratio)).mean().item())
    loss.backward()
    torch.testing.assert_close(log_prob.grad, (-(advantages * ratio) / tokens / 3).unsqueeze(-1) * mask)
    assert metrics["ratio_max"].item() == pytest.approx(ratio.max().item())
    assert metrics["ratio_min"].item() == pytest.approx(ratio.min().item())
    assert metrics["pg_clipfrac"].item() == 0 and metrics["pg_clipfrac_lower"].item() == 0

    # A clip range every ratio leaves: a positive advantage above 1 + high, or a negative one below 1 - low, is cut off
    # (the first sequence only).
    log_prob.grad = None
    clipped, metrics = policy_loss(log_prob, old, advantages, mask, 1e-6, 1e-6, 3.0, "seq-mean-token-mean", loss_mode="gspo")
    clipped.backward()
    cut = ((advantages > 0) & (ratio > 1)) | ((advantages < 0) & (ratio < 1))
    assert cut.tolist() == [True, False, False]
    for row in range(3):
        assert torch.all(log_prob.grad[row] == 0) == bool(cut[row])
    assert metrics["pg_clipfrac"].item() > 0


def test_an_unknown_policy_loss_is_refused():
    with pytest.raises(ValueError, match="unknown loss_mode 'gpg'"):
        policy_loss(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1), torch.ones(1, 2), loss_mode="gpg")
