"""The training math, as small pure functions on tensors (verl's `core_algos` semantics, re-derived from its docs).

Shapes: B sequences, T tokens. `response_mask` (m) is 1 on tokens the policy sampled and 0 elsewhere.
Every function here is deterministic and free of distributed state, so it can be tested by hand.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
KL_KINDS = ("k1", "kl", "abs", "k2", "mse", "k3", "low_var_kl")


def _keys(ids: Tensor | Sequence) -> list:
    return ids.tolist() if isinstance(ids, Tensor) else list(ids)


def _group_index(group_ids: Tensor | Sequence) -> tuple[Tensor, int]:
    """Maps arbitrary group ids (ints or strings) to dense indices 0..G-1, in order of first appearance."""
    keys = _keys(group_ids)
    dense: dict = {}
    index = [dense.setdefault(k, len(dense)) for k in keys]
    return torch.tensor(index, dtype=torch.long), len(dense)


def grpo_advantages(scores: Tensor, group_ids: Tensor | Sequence, norm_by_std: bool = True, eps: float = 1e-6) -> Tensor:
    """GRPO outcome advantages, one per sequence.

    For the group g(i) of sequence i with n members:
        mu = mean_j r_j, sigma = std_j r_j (unbiased, n-1); a group of one uses mu = 0, sigma = 1.
        A_i = (r_i - mu) / (sigma + eps)   if norm_by_std
        A_i = r_i - mu                     otherwise (Dr.GRPO)
    A group whose scores are all equal gets A = 0.
    """
    scores = scores.to(torch.float32)
    index, num_groups = _group_index(group_ids)
    counts = torch.zeros(num_groups).index_add_(0, index, torch.ones_like(scores))
    sums = torch.zeros(num_groups).index_add_(0, index, scores)
    mean = sums / counts
    sq_dev = torch.zeros(num_groups).index_add_(0, index, (scores - mean[index]) ** 2)
    std = torch.sqrt(sq_dev / (counts - 1).clamp(min=1))
    singleton = counts == 1
    mean = torch.where(singleton, torch.zeros_like(mean), mean)
    std = torch.where(singleton, torch.ones_like(std), std)
    centered = scores - mean[index]
    if not norm_by_std:
        return centered
    return centered / (std[index] + eps)


def rloo_advantages(scores: Tensor, group_ids: Tensor | Sequence) -> Tensor:
    """RLOO (leave-one-out) advantages: A_i = r_i - mean_{j != i} r_j = (r_i - mu) * n / (n - 1); a group of one gets A = r."""
    scores = scores.to(torch.float32)
    index, num_groups = _group_index(group_ids)
    counts = torch.zeros(num_groups).index_add_(0, index, torch.ones_like(scores))
    sums = torch.zeros(num_groups).index_add_(0, index, scores)
    n = counts[index]
    mean = sums[index] / n
    loo = (scores - mean) * n / (n - 1).clamp(min=1)
    return torch.where(n == 1, scores, loo)


def episode_advantages(
    scores: Tensor,
    group_ids: Tensor | Sequence,
    episode_ids: Tensor | Sequence | None,
    estimator: Callable[[Tensor, Sequence], Tensor],
) -> Tensor:
    """`estimator` (e.g. grpo_advantages) applied once per episode, its advantage given to every row of the episode.

    An agent that rewrites its own history leaves one episode as several sequences (rows). Each row trains, but the
    episode is one sample of its group: counting it once per row would pull the group's mean and std towards the
    episodes that happened to be cut. So the estimator sees only each episode's first row, and the result is broadcast
    back. Rows of one episode must share their group and score. Without episode_ids every row is its own episode, and
    this is exactly `estimator(scores, group_ids)`.
    """
    if episode_ids is None:
        return estimator(scores, group_ids)
    episodes, groups = _keys(episode_ids), _keys(group_ids)
    index, _ = _group_index(episodes)
    first: dict = {}
    for row, episode in enumerate(episodes):
        head = first.setdefault(episode, row)
        if groups[row] != groups[head] or scores[row] != scores[head]:
            raise ValueError(f"episode {episode!r}: rows {head} and {row} differ in group or score")
    heads = list(first.values())
    return estimator(scores[heads], [groups[row] for row in heads])[index]


def _check_mode(loss_agg_mode: str) -> None:
    if loss_agg_mode not in LOSS_AGG_MODES:
        raise ValueError(f"unknown loss_agg_mode {loss_agg_mode!r}; expected one of {', '.join(LOSS_AGG_MODES)}")


def _sum_norm_length(loss_scale_factor: float | None) -> float:
    if loss_scale_factor is None or not loss_scale_factor > 0:
        raise ValueError(
            f"seq-mean-token-sum-norm needs loss_scale_factor > 0 (the constant L every sequence's token sum is divided "
            f"by, e.g. the maximum response length), got {loss_scale_factor!r}"
        )
    return float(loss_scale_factor)


def agg_norm(loss_mask: Tensor, loss_agg_mode: str, loss_scale_factor: float | None = None) -> float:
    """The denominator of `agg_loss`, counted on `loss_mask` (m, [B, T]), clamped to at least 1 count:

    token-mean:               N = sum(m), the loss tokens
    seq-mean-token-sum/-mean: S = the sequences (rows) with sum(m) > 0
    seq-mean-token-sum-norm:  S * L, L = loss_scale_factor (required)

    A trainer that cuts a mini-batch into micro-batches (and ranks) computes this once on the whole mini-batch's mask
    and passes it to every `agg_loss` call as `global_norm`.
    """
    _check_mode(loss_agg_mode)
    if loss_agg_mode == "token-mean":
        return max(float(loss_mask.sum().item()), 1.0)
    sequences = max(float((loss_mask.sum(dim=-1) > 0).sum().item()), 1.0)
    if loss_agg_mode == "seq-mean-token-sum-norm":
        return sequences * _sum_norm_length(loss_scale_factor)
    return sequences


def agg_loss(
    loss_mat: Tensor,
    loss_mask: Tensor,
    loss_agg_mode: str,
    loss_scale_factor: float | None = None,
    global_norm: float | None = None,
) -> Tensor:
    """Reduces a [B, T] per-token loss l to a scalar over the tokens where loss_mask (m) is 1: numerator / norm, with
    s_i = sum_t l*m the token sum of sequence i and the norm from `agg_norm` (N tokens, S non-empty sequences):

    token-mean:              sum_i s_i / N
    seq-mean-token-sum:      sum_i s_i / S
    seq-mean-token-mean:     sum_i [s_i / (sum_t m + 1e-8)] / S
    seq-mean-token-sum-norm: sum_i s_i / (S * L), L = loss_scale_factor

    seq-mean-token-sum-norm is Dr.GRPO's (https://arxiv.org/abs/2503.20783) aggregation: the mean over sequences of each
    sequence's token sum divided by a constant L, i.e. seq-mean-token-sum / L. L is required here (the worker passes
    loss_scale_factor, else data.max_response_length), never a tensor width or the batch's longest response, so the
    scale is the same at every step. This differs from verl's `core_algos.agg_loss`, which for this mode returns
    sum_i s_i / L, NOT divided by the number of sequences (nor by its dp_size / global_batch_size, which this mode
    ignores), with L defaulting to loss_mask.shape[-1] (the padded width of the micro-batch tensor): there the loss
    scales with how many sequences a micro-batch holds.

    Fully masked rows add nothing and are not counted; a fully masked batch gives 0 (norms are at least 1).
    global_norm is the norm of the whole mini-batch across micro-batches and ranks (`agg_norm` of its mask): with it,
    agg_loss of the micro-batches sums to agg_loss of the mini-batch in one go. None means agg_norm(loss_mask).
    """
    _check_mode(loss_agg_mode)
    norm = agg_norm(loss_mask, loss_agg_mode, loss_scale_factor) if global_norm is None else float(global_norm)
    mask = loss_mask.to(loss_mat.dtype)
    masked = loss_mat * mask
    if loss_agg_mode == "seq-mean-token-mean":
        return (masked.sum(dim=-1) / (mask.sum(dim=-1) + 1e-8)).sum() / norm
    return masked.sum() / norm


def masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """sum(x*m) / (sum(m) + 1e-8), verl's metric average."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / (mask.sum() + 1e-8)


def clipped_surrogate(
    log_prob: Tensor,
    old_log_prob: Tensor,
    advantages: Tensor,
    clip_ratio_low: float = 0.2,
    clip_ratio_high: float = 0.2,
    clip_ratio_c: float = 3.0,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The per-token PPO loss of `policy_loss` before masking and aggregation, with the token-level facts its
    metrics are made of: `clipped` (L2 > L1), `clipped_lower` (dual clip hit), `neg_delta` (-d) and `ratio` (rho)."""
    if clip_ratio_c <= 1.0:
        raise ValueError(f"clip_ratio_c must be > 1, got {clip_ratio_c}")
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1).expand_as(log_prob)
    advantages = advantages.to(log_prob.dtype)
    delta = torch.clamp(log_prob - old_log_prob, -20.0, 20.0)
    ratio = torch.exp(delta)
    loss_unclipped = -advantages * ratio
    loss_clipped = -advantages * torch.clamp(ratio, 1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    loss_max = torch.maximum(loss_unclipped, loss_clipped)
    loss_dual = -advantages * clip_ratio_c
    negative = advantages < 0
    token_loss = torch.where(negative, torch.minimum(loss_dual, loss_max), loss_max)
    facts = {
        "clipped": (loss_clipped > loss_unclipped).detach().float(),
        "clipped_lower": ((loss_max > loss_dual) & negative).detach().float(),
        "neg_delta": -delta.detach(),
        "ratio": ratio.detach(),
    }
    return token_loss, facts


def gspo_surrogate(
    log_prob: Tensor,
    old_log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    clip_ratio_low: float,
    clip_ratio_high: float,
) -> tuple[Tensor, dict[str, Tensor]]:
    """GSPO's per-token loss (https://arxiv.org/abs/2507.18071, the GSPO-token form verl computes): one importance
    ratio per sequence, the geometric mean of its tokens' ratios, carried to every token with the token's own gradient:

        s_i = exp(sum_t m*(logp - old_logp) / max(sum_t m, 1))
        s_i,t = sg(s_i) * pi_t / sg(pi_t), i.e. exp(logp - sg(logp) + sg(log s_i)), clamped at exp(10)
        token loss = max(-A*s_i,t, -A*clamp(s_i,t, 1 - clip_ratio_low, 1 + clip_ratio_high))

    No dual clip. `clipped` and `ratio` are per token (every token of a sequence shares the ratio's value)."""
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1).expand_as(log_prob)
    advantages = advantages.to(log_prob.dtype)
    mask = response_mask.to(log_prob.dtype)
    delta = log_prob - old_log_prob
    sequence_log_ratio = (delta * mask).sum(dim=-1) / mask.sum(dim=-1).clamp(min=1.0)
    log_ratio = torch.clamp(log_prob - log_prob.detach() + sequence_log_ratio.detach().unsqueeze(-1), max=10.0)
    ratio = torch.exp(log_ratio)
    loss_unclipped = -advantages * ratio
    loss_clipped = -advantages * torch.clamp(ratio, 1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    token_loss = torch.maximum(loss_unclipped, loss_clipped)
    facts = {
        "clipped": (loss_clipped > loss_unclipped).detach().float(),
        "clipped_lower": torch.zeros_like(token_loss).detach(),
        "neg_delta": -delta.detach(),
        "ratio": ratio.detach(),
    }
    return token_loss, facts


#: Policy losses: PPO's clipped surrogate with dual clip (vanilla) or GSPO's sequence-level one.
POLICY_LOSS_MODES = ("vanilla", "gspo")


def policy_loss(
    log_prob: Tensor,
    old_log_prob: Tensor,
    advantages: Tensor,
    response_mask: Tensor,
    clip_ratio_low: float = 0.2,
    clip_ratio_high: float = 0.2,
    clip_ratio_c: float = 3.0,
    loss_agg_mode: str = "token-mean",
    rollout_is_weights: Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_norm: float | None = None,
    global_tokens: float | None = None,
    loss_mode: str = "vanilla",
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO clipped surrogate with dual clip (https://arxiv.org/abs/1912.09729), per token:

        d = clamp(logp - old_logp, -20, 20), rho = exp(d)
        L1 = -A*rho, L2 = -A*clamp(rho, 1 - clip_ratio_low, 1 + clip_ratio_high), Lc = max(L1, L2)
        L3 = -A*clip_ratio_c; token loss = min(L3, Lc) where A < 0, else Lc
        optionally multiplied by rollout_is_weights (truncated importance sampling), then
        agg_loss(token loss, response_mask, loss_agg_mode, loss_scale_factor, global_norm).

    advantages is [B] (broadcast over tokens) or [B, T]. Metrics, over the response tokens:
    pg_clipfrac = mean(L2 > L1), pg_clipfrac_lower = mean(Lc > L3 and A < 0), ppo_kl = mean(-d), each the sum over
    this tensor divided by global_tokens (the response tokens of the whole mini-batch, so micro-batch values add up
    like the loss) or, when None, masked_mean over this tensor; ratio_max and ratio_min, the extremes of rho over the
    response tokens (-inf and +inf when there are none).

    loss_mode gspo takes `gspo_surrogate` for the token loss instead (clip_ratio_c unused, pg_clipfrac_lower 0), and
    the caller aggregates it seq-mean-token-mean, as verl does for GSPO whatever loss_agg_mode says.
    """
    if loss_mode not in POLICY_LOSS_MODES:
        raise ValueError(f"unknown loss_mode {loss_mode!r}; expected one of {', '.join(POLICY_LOSS_MODES)}")
    if loss_mode == "gspo":
        token_loss, facts = gspo_surrogate(log_prob, old_log_prob, advantages, response_mask, clip_ratio_low, clip_ratio_high)
    else:
        token_loss, facts = clipped_surrogate(log_prob, old_log_prob, advantages, clip_ratio_low, clip_ratio_high, clip_ratio_c)
    if rollout_is_weights is not None:
        token_loss = token_loss * rollout_is_weights
    loss = agg_loss(token_loss, response_mask, loss_agg_mode, loss_scale_factor, global_norm)

    def token_mean(values: Tensor) -> Tensor:
        if global_tokens is None:
            return masked_mean(values, response_mask)
        return (values * response_mask.to(values.dtype)).sum() / max(float(global_tokens), 1.0)

    on = response_mask.bool()
    ratio = facts["ratio"]
    metrics = {
        "pg_clipfrac": token_mean(facts["clipped"]),
        "pg_clipfrac_lower": token_mean(facts["clipped_lower"]),
        "ppo_kl": token_mean(facts["neg_delta"]),
        "ratio_max": torch.where(on, ratio, -torch.inf).max() if ratio.numel() else torch.tensor(-torch.inf),
        "ratio_min": torch.where(on, ratio, torch.inf).min() if ratio.numel() else torch.tensor(torch.inf),
    }
    return loss, metrics


def response_turn_classes(response_mask: Tensor) -> dict[str, Tensor]:
    """Splits the response positions of a [B, T] response_mask into classes, from the mask alone (no token ids, so
    language and template neutral): every contiguous run of 1s is one assistant turn (the tool or user chunks between
    turns are 0).

    turn_start:  the first sampled token of every turn (the call-or-answer decision in a tool task)
    final_turn:  every token of each sequence's last turn (the answer in a tool task)
    tool_turns:  every token of the sequence's earlier turns (those followed by a tool or user chunk)
    Returns bool [B, T] masks; final_turn and tool_turns split the response, turn_start overlaps both.
    """
    on = response_mask.bool()
    before = torch.zeros_like(on)
    before[:, 1:] = on[:, :-1]
    starts = on & ~before
    turn = starts.long().cumsum(dim=-1)  # 1-based index of the turn a position belongs to
    final = on & (turn == turn[:, -1:])
    return {"turn_start": starts, "final_turn": final, "tool_turns": on & ~final}


def rollout_is_weights(
    old_log_prob: Tensor, rollout_log_prob: Tensor, threshold: float, mask: Tensor, mode: str = "truncate"
) -> tuple[Tensor, dict[str, float]]:
    """Token-level importance weights w = exp(old - rollout) = pi_old / pi_rollout on the masked tokens (0 elsewhere),
    correcting for the engine sampling from other weights or kernels than the trainer's (a stale policy under
    asynchronous training, or training-inference mismatch). Above `threshold`:
    - mode "truncate": w = min(w, threshold), verl's truncated importance sampling (TIS);
    - mode "mask": w = 0, the token leaves the loss (its denominator keeps it), AReaL's decoupled PPO with
      behav_imp_weight_cap = threshold, where old is the proximal policy and rollout the behaviour policy.
    Also the weights' statistics before the threshold: mean, max, and the fraction of tokens above it."""
    if mode not in ("truncate", "mask"):
        raise ValueError(f"rollout_is mode must be truncate or mask, got {mode!r}")
    ratio = torch.exp(torch.clamp(old_log_prob - rollout_log_prob, -20.0, 20.0))
    above = ratio > threshold
    capped = torch.clamp(ratio, max=threshold) if mode == "truncate" else torch.where(above, torch.zeros_like(ratio), ratio)
    weights = capped * mask
    on = mask > 0
    stats = {
        "rollout_is/mean": masked_mean(ratio, mask).item(),
        "rollout_is/max": ratio[on].max().item() if on.any() else 0.0,
        "rollout_is/clipped_frac": masked_mean(above.float(), mask).item(),
    }
    return weights, stats


def kl_penalty(log_prob: Tensor, ref_log_prob: Tensor, kind: str) -> Tensor:
    """Per-token KL estimate between the policy and the reference, from sampled-token log-probs.

    k1 / kl:          logp - ref
    abs:              |logp - ref|
    k2 / mse:         0.5 * (logp - ref)^2
    k3 / low_var_kl:  x = clamp(ref - logp, -20, 20); clamp(exp(x) - x - 1, -10, 10)  (Schulman's unbiased, low variance)
    """
    if kind in ("k1", "kl"):
        return log_prob - ref_log_prob
    if kind == "abs":
        return (log_prob - ref_log_prob).abs()
    if kind in ("k2", "mse"):
        return 0.5 * (log_prob - ref_log_prob).square()
    if kind in ("k3", "low_var_kl"):
        x = torch.clamp(ref_log_prob - log_prob, -20.0, 20.0)
        return torch.clamp(torch.exp(x) - x - 1.0, -10.0, 10.0)
    raise ValueError(f"unknown kl_loss_type {kind!r}; expected one of {', '.join(KL_KINDS)}")


def _scaled(logits: Tensor, temperature: float) -> Tensor:
    logits = logits.float()
    # Skipping the division at temperature 1 saves a full pass over [tokens, vocab].
    return logits if temperature == 1.0 else logits / temperature


def log_probs_and_entropy(logits: Tensor, labels: Tensor, temperature: float = 1.0) -> tuple[Tensor, Tensor]:
    """Log-probability of each label and the entropy of the temperature-scaled distribution, in float32.

    logits [..., V] predict labels [...]; both come from log_softmax(logits / temperature), the distribution the rollout
    engine samples from: logp = log_softmax(z)[label], entropy = -sum_v exp(log_softmax(z)_v) * log_softmax(z)_v.
    The log-probs are bit-identical to `token_log_probs`, so on-policy ratios are exactly 1.
    """
    log_softmax = torch.log_softmax(_scaled(logits, temperature), dim=-1)
    picked = torch.gather(log_softmax, -1, labels.unsqueeze(-1)).squeeze(-1)
    entropy = -(torch.exp(log_softmax) * log_softmax).sum(dim=-1)
    return picked, entropy


def token_log_probs(logits: Tensor, labels: Tensor, temperature: float = 1.0) -> Tensor:
    """log_softmax(logits / temperature) at the labels, in float32, via the fused cross-entropy kernel (no entropy)."""
    scaled = _scaled(logits, temperature)
    flat = torch.nn.functional.cross_entropy(scaled.reshape(-1, scaled.shape[-1]), labels.reshape(-1), reduction="none")
    return -flat.reshape(labels.shape)


def _head_chunk(
    hidden: Tensor, weight: Tensor, bias: Tensor | None, labels: Tensor, temperature: float, with_entropy: bool
) -> tuple[Tensor, ...]:
    logits = torch.nn.functional.linear(hidden, weight, bias)
    if with_entropy:
        return log_probs_and_entropy(logits, labels, temperature)
    return (token_log_probs(logits, labels, temperature),)


def head_log_probs(
    hidden: Tensor,
    weight: Tensor,
    labels: Tensor,
    temperature: float = 1.0,
    chunk_tokens: int = 1024,
    with_entropy: bool = True,
    bias: Tensor | None = None,
) -> tuple[Tensor, Tensor | None]:
    """`log_probs_and_entropy` (or, without entropy, `token_log_probs`) of labels [N] under the lm_head applied to the
    final hidden states [N, H]: logits = hidden @ weight.T (+ bias), chunk_tokens rows at a time.

    The [N, V] logits and their float32 log_softmax never exist whole: with a 151,936-token vocabulary they are 0.6 MB
    per token each. With gradients each chunk runs under non-reentrant activation checkpointing, so autograd keeps only
    the chunk's inputs and the backward recomputes one chunk's [chunk, V] at a time; values and gradients are those of
    the unchunked computation (up to float summation order in the weight's gradient)."""
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    track = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    pieces: list[tuple[Tensor, ...]] = []
    for start in range(0, max(hidden.shape[0], 1), chunk_tokens):
        args = (hidden[start : start + chunk_tokens], weight, bias, labels[start : start + chunk_tokens], temperature, with_entropy)
        if track:
            pieces.append(checkpoint(_head_chunk, *args, use_reentrant=False))
        else:
            pieces.append(_head_chunk(*args))
    picked = torch.cat([piece[0] for piece in pieces])
    return picked, torch.cat([piece[1] for piece in pieces]) if with_entropy else None


def sft_loss(log_probs: Tensor, loss_mask: Tensor, num_tokens: float) -> Tensor:
    """Supervised fine-tuning loss of one micro-batch: -sum(logp * m) / num_tokens, where num_tokens counts the loss
    tokens of the whole batch (all micro-batches and ranks), so the micro-batch losses sum to the batch's token-mean
    negative log-likelihood (verl's SFT trainer averages over the batch's loss tokens the same way)."""
    return agg_loss(-log_probs, loss_mask, "token-mean", global_norm=num_tokens)
