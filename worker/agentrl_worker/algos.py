"""The training math, as small pure functions on tensors (verl's `core_algos` semantics, re-derived from its docs).

Shapes: B sequences, T tokens. `response_mask` (m) is 1 on tokens the policy sampled and 0 elsewhere.
Every function here is deterministic and free of distributed state, so it can be tested by hand.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

LOSS_AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm")
KL_KINDS = ("k1", "kl", "abs", "k2", "mse", "k3", "low_var_kl")


def _group_index(group_ids: Tensor | Sequence) -> tuple[Tensor, int]:
    """Maps arbitrary group ids (ints or strings) to dense indices 0..G-1, in order of first appearance."""
    if isinstance(group_ids, Tensor):
        keys = group_ids.tolist()
    else:
        keys = list(group_ids)
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


def agg_loss(loss_mat: Tensor, loss_mask: Tensor, loss_agg_mode: str, loss_scale_factor: float | None = None) -> Tensor:
    """Reduces a [B, T] per-token loss to a scalar over the tokens where loss_mask is 1.

    token-mean:              sum(l*m) / sum(m)
    seq-mean-token-sum:      mean over rows with sum(m) > 0 of s_i = sum_t l*m
    seq-mean-token-mean:     mean over rows with sum(m) > 0 of s_i = sum_t l*m / (sum_t m + 1e-8)
    seq-mean-token-sum-norm: sum(l*m) / loss_scale_factor, the factor defaulting to T (not divided by B: Dr.GRPO)
    A fully masked batch gives 0 (the denominators are clamped to at least 1); fully masked rows are ignored.
    """
    mask = loss_mask.to(loss_mat.dtype)
    masked = loss_mat * mask
    if loss_agg_mode == "token-mean":
        return masked.sum() / mask.sum().clamp(min=1.0)
    if loss_agg_mode in ("seq-mean-token-sum", "seq-mean-token-mean"):
        row_tokens = mask.sum(dim=-1)
        row_loss = masked.sum(dim=-1)
        if loss_agg_mode == "seq-mean-token-mean":
            row_loss = row_loss / (row_tokens + 1e-8)
        valid = (row_tokens > 0).to(loss_mat.dtype)
        return (row_loss * valid).sum() / valid.sum().clamp(min=1.0)
    if loss_agg_mode == "seq-mean-token-sum-norm":
        factor = float(loss_mask.shape[-1]) if loss_scale_factor is None else float(loss_scale_factor)
        return masked.sum() / factor
    raise ValueError(f"unknown loss_agg_mode {loss_agg_mode!r}; expected one of {', '.join(LOSS_AGG_MODES)}")


def agg_loss_numerator(loss_mat: Tensor, loss_mask: Tensor, loss_agg_mode: str) -> Tensor:
    """The numerator of `agg_loss`, summable across micro-batches and ranks; the worker divides the sum by the
    mini-batch's global count (tokens for token-mean, non-empty rows for seq-mean-*, rows x scale for -sum-norm)."""
    mask = loss_mask.to(loss_mat.dtype)
    masked = loss_mat * mask
    if loss_agg_mode in ("token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"):
        return masked.sum()
    if loss_agg_mode == "seq-mean-token-mean":
        return (masked.sum(dim=-1) / (mask.sum(dim=-1) + 1e-8)).sum()
    raise ValueError(f"unknown loss_agg_mode {loss_agg_mode!r}; expected one of {', '.join(LOSS_AGG_MODES)}")


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
) -> tuple[Tensor, dict[str, Tensor]]:
    """PPO clipped surrogate with dual clip (https://arxiv.org/abs/1912.09729), per token:

        d = clamp(logp - old_logp, -20, 20), rho = exp(d)
        L1 = -A*rho, L2 = -A*clamp(rho, 1 - clip_ratio_low, 1 + clip_ratio_high), Lc = max(L1, L2)
        L3 = -A*clip_ratio_c; token loss = min(L3, Lc) where A < 0, else Lc
        optionally multiplied by rollout_is_weights (truncated importance sampling), then agg_loss.

    advantages is [B] (broadcast over tokens) or [B, T]. Metrics (masked means over response tokens):
    pg_clipfrac = mean(L2 > L1), pg_clipfrac_lower = mean(Lc > L3 and A < 0), ppo_kl = mean(-d).
    """
    token_loss, facts = clipped_surrogate(log_prob, old_log_prob, advantages, clip_ratio_low, clip_ratio_high, clip_ratio_c)
    if rollout_is_weights is not None:
        token_loss = token_loss * rollout_is_weights
    loss = agg_loss(token_loss, response_mask, loss_agg_mode)
    metrics = {
        "pg_clipfrac": masked_mean(facts["clipped"], response_mask),
        "pg_clipfrac_lower": masked_mean(facts["clipped_lower"], response_mask),
        "ppo_kl": masked_mean(facts["neg_delta"], response_mask),
    }
    return loss, metrics


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
