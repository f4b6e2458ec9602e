"""Batch tensor files and how a batch is cut into per-rank micro-batches by a token budget.

Every rank reads the same file and computes the same plan, so no communication is needed to agree on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from safetensors.torch import load_file
from torch import Tensor

from .config import ConfigError

# name -> (dtype, rank); the [B, T] tensors are aligned with input_ids.
BATCH_TENSORS = {
    "input_ids": (torch.int64, 2),
    "attention_mask": (torch.int64, 2),
    "response_mask": (torch.int64, 2),
    "rewards": (torch.float32, 1),
    "group_ids": (torch.int64, 1),
    "episode_ids": (torch.int64, 1),
    "rollout_log_probs": (torch.float32, 2),
    "old_log_probs": (torch.float32, 2),
    "ref_log_probs": (torch.float32, 2),
    "entropy": (torch.float32, 2),
}
REQUIRED = ("input_ids", "attention_mask", "response_mask")


def load_batch(path: str, extra: str | None = None) -> dict[str, Tensor]:
    """Loads and checks a batch file (plus, optionally, the log-prob file compute_log_probs wrote for it)."""
    try:
        tensors = load_file(path)
    except Exception as err:  # a missing or corrupt file is the caller's input error
        raise ConfigError(f"batch {path}: cannot read safetensors ({err})") from err
    if extra is not None:
        try:
            tensors.update(load_file(extra))
        except Exception as err:
            raise ConfigError(f"log_probs {extra}: cannot read safetensors ({err})") from err
    for name in REQUIRED:
        if name not in tensors:
            raise ConfigError(f"batch {path}: missing tensor {name}")
    batch_size, seq_len = tensors["input_ids"].shape if tensors["input_ids"].dim() == 2 else (-1, -1)
    if batch_size < 1:
        raise ConfigError(f"batch {path}: input_ids must be [B, T] with B >= 1")
    out: dict[str, Tensor] = {}
    for name, tensor in tensors.items():
        if name not in BATCH_TENSORS:
            raise ConfigError(f"batch {path}: unknown tensor {name}")
        dtype, rank = BATCH_TENSORS[name]
        expected = (batch_size, seq_len) if rank == 2 else (batch_size,)
        if tuple(tensor.shape) != expected:
            raise ConfigError(f"batch {path}: {name} has shape {list(tensor.shape)}, expected {list(expected)}")
        if tensor.dtype != dtype:
            raise ConfigError(f"batch {path}: {name} has dtype {tensor.dtype}, expected {dtype}")
        out[name] = tensor
    response = out["response_mask"].bool()
    if (response & ~out["attention_mask"].bool()).any():
        raise ConfigError(f"batch {path}: response_mask is 1 where attention_mask is 0")
    if response[:, 0].any():
        raise ConfigError(f"batch {path}: response_mask is 1 at position 0 (a response token needs a context)")
    return out


@dataclass
class Plan:
    """For each rank, a list of micro-batches, each a list of row indices into the batch. Every rank gets the same
    number of micro-batches (some possibly empty), because FSDP needs all ranks in every forward and backward."""

    per_rank: list[list[list[int]]]


def plan_micro_batches(rows: list[int], lengths: list[int], world_size: int, token_budget: int, packed: bool = False) -> Plan:
    """Spreads `rows` over ranks balancing tokens (longest first, to the lightest rank), then cuts each rank's rows,
    longest first, into micro-batches within `token_budget`. Padded (`packed` False), a micro-batch costs rows x its
    longest row, and a row joins the last micro-batch or opens the next. Packed (`use_remove_padding`), it costs the sum
    of its rows' lengths, and a row joins the first micro-batch with room (first-fit decreasing), as verl's dynamic
    batch size counts tokens without padding."""
    order = sorted(rows, key=lambda r: (-lengths[r], r))
    load = [0] * world_size
    assigned: list[list[int]] = [[] for _ in range(world_size)]
    for row in order:
        target = min(range(world_size), key=lambda k: (load[k], k))
        assigned[target].append(row)
        load[target] += lengths[row]
    per_rank = [(_first_fit if packed else _fill_last)(rank_rows, lengths, token_budget) for rank_rows in assigned]
    most = max(len(b) for b in per_rank)
    for bins in per_rank:
        bins.extend([] for _ in range(most - len(bins)))
    return Plan(per_rank)


def _fill_last(rows: list[int], lengths: list[int], budget: int) -> list[list[int]]:
    bins: list[list[int]] = []
    for row in rows:  # longest first, so bin[0] is the longest row of its bin
        if bins and (len(bins[-1]) + 1) * lengths[bins[-1][0]] <= budget:
            bins[-1].append(row)
        else:
            bins.append([row])
    return bins


def _first_fit(rows: list[int], lengths: list[int], budget: int) -> list[list[int]]:
    bins: list[list[int]] = []
    used: list[int] = []
    for row in rows:
        slot = next((i for i, tokens in enumerate(used) if tokens + lengths[row] <= budget), None)
        if slot is None:
            bins.append([row])
            used.append(lengths[row])
        else:
            bins[slot].append(row)
            used[slot] += lengths[row]
    return bins


@dataclass
class PackedRows:
    """A micro-batch's rows as one sequence without padding: token k is input_ids[row[k], col[k]] of the padded rows,
    at position position_ids[0, k], which restarts at 0 where a row starts (how attention kernels and transformers'
    masks tell the rows apart). `targets` are the tokens of the response (response_mask 1) that some earlier token of
    their own row predicts: hidden state targets - 1 predicts token targets."""

    input_ids: Tensor
    position_ids: Tensor
    row: Tensor
    col: Tensor
    targets: Tensor


def pack_rows(input_ids: Tensor, attention_mask: Tensor, response_mask: Tensor) -> PackedRows:
    """Packs [b, t] padded rows (right or left padding) into one [1, n] sequence of their attended tokens, row by row."""
    attended = attention_mask.bool()
    row, col = attended.nonzero(as_tuple=True)  # row-major: each row's tokens in order, then the next row's
    positions = (attention_mask.cumsum(-1) - 1)[row, col]
    targets = (response_mask.bool()[row, col] & (positions > 0)).nonzero().squeeze(-1)
    return PackedRows(input_ids[row, col].unsqueeze(0), positions.unsqueeze(0), row, col, targets)


def shared_prefix_length(input_ids: Tensor, attention_mask: Tensor, limit: int) -> int:
    """How many leading tokens every row has in common, token for token and attended in all of them (so a row padded
    on the left shares nothing), at most `limit`."""
    same = (input_ids == input_ids[:1]).all(dim=0) & attention_mask.bool().all(dim=0)
    return int(same[: max(limit, 0)].int().cumprod(dim=0).sum())


def sequence_lengths(attention_mask: Tensor) -> list[int]:
    """Length of each row up to its last attended token (right padding is dropped, left padding kept)."""
    positions = torch.arange(attention_mask.shape[1]).expand_as(attention_mask)
    last = torch.where(attention_mask.bool(), positions, torch.full_like(positions, -1)).max(dim=1).values
    return (last + 1).tolist()


def mini_batches(
    group_ids: Tensor, prompts_per_mini_batch: int | None, shuffle: torch.Generator | None = None
) -> list[list[int]]:
    """Row indices of each mini-batch: whole groups (prompts), in order of first appearance. With a `shuffle`
    generator (verl's actor.shuffle), the same number of mini-batches of the same sizes, filled with rows drawn at
    random from every group, as TRL's GRPOTrainer draws them: on the CPU demo its sampled reward rose faster per step
    than agentrl's whole-group mini-batches, and fell onto agentrl's curve with its shuffle off (docs/benchmarks.md).
    Advantages come from the whole batch first, so a group split across mini-batches keeps them."""
    groups: dict[int, list[int]] = {}
    for row, gid in enumerate(group_ids.tolist()):
        groups.setdefault(gid, []).append(row)
    ordered = list(groups.values())
    size = prompts_per_mini_batch or len(ordered)
    batches = [sum(ordered[i : i + size], []) for i in range(0, len(ordered), size)]
    if shuffle is None:
        return batches
    drawn = torch.randperm(len(group_ids), generator=shuffle).tolist()
    starts = [sum(len(b) for b in batches[:i]) for i in range(len(batches))]
    return [sorted(drawn[start : start + len(b)]) for start, b in zip(starts, batches)]
