"""The rows that decode together, sharing one forward pass per step over a left-padded KV cache.

Each layer's cache is one [rows, kv_heads, length, head_dim] tensor. A row's real tokens sit at the right end of it;
the columns to their left are zero padding, hidden by the attention mask. Rows are prefilled one prompt at a time
(no padding inside a prefill, so no attention row is ever fully masked), then joined to the batch between steps by
left-padding both sides to one length; finished rows are dropped with an index select, and columns that became
padding in every row are trimmed. Positions are passed explicitly, so a row's rotary positions are 0..n-1 whatever
padding precedes it, and its logits match a plain forward pass over its tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import DynamicCache

# Per layer (keys, values), each [rows, kv_heads, length, head_dim].
LayerKV = tuple[torch.Tensor, torch.Tensor]


@dataclass
class Prefilled:
    """A prompt's KV cache ([1, kv_heads, prompt_len, head_dim] per layer) and the logits after its last token."""

    kv: list[LayerKV]
    last_logits: torch.Tensor  # [vocab]
    length: int


class DecodeBatch:
    def __init__(self, model: torch.nn.Module, device: torch.device):
        self.model = model
        self.device = device
        self.cache: DynamicCache | None = None
        self.mask = torch.zeros(0, 0, dtype=torch.long, device=device)  # [rows, length], 1 on real tokens
        self.positions = torch.zeros(0, dtype=torch.long, device=device)  # [rows], position of the next input token

    @property
    def size(self) -> int:
        return int(self.positions.shape[0])

    @property
    def length(self) -> int:
        return int(self.mask.shape[1])

    @torch.no_grad()
    def prefill(self, input_ids: list[int], cached: list[LayerKV] | None = None, start: int = 0) -> Prefilled:
        """Runs a prompt; with `cached`, the key/value of its first `start` tokens (prefix_cache.py), only the rest."""
        ids = torch.tensor([input_ids[start:]], dtype=torch.long, device=self.device)
        cache = DynamicCache(ddp_cache_data=cached) if start else DynamicCache()
        positions = torch.arange(start, len(input_ids), dtype=torch.long, device=self.device).unsqueeze(0)
        out = self.model(input_ids=ids, past_key_values=cache, position_ids=positions, use_cache=True, logits_to_keep=1)
        kv = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
        return Prefilled(kv=kv, last_logits=out.logits[0, -1], length=len(input_ids))

    def row_kv(self, row: int) -> list[LayerKV]:
        """Row `row`'s key/value over the tokens it has fed, [1, kv_heads, fed, head_dim] per layer: copies, so the
        batch's own tensors can be freed."""
        fed = int(self.positions[row])
        return [
            (k[row : row + 1, :, k.shape[2] - fed :].clone(), v[row : row + 1, :, v.shape[2] - fed :].clone())
            for k, v in self._layers()
        ]

    def add(self, rows: list[Prefilled]) -> None:
        """Append rows (in this order) after the current ones."""
        if not rows:
            return
        new_length = max([self.length] + [r.length for r in rows])
        layers = self._layers()
        merged: list[LayerKV] = []
        for i in range(len(rows[0].kv)):
            keys = [_left_pad(k, new_length) for k, _ in ([layers[i]] if layers else [])]
            values = [_left_pad(v, new_length) for _, v in ([layers[i]] if layers else [])]
            keys += [_left_pad(r.kv[i][0], new_length) for r in rows]
            values += [_left_pad(r.kv[i][1], new_length) for r in rows]
            merged.append((torch.cat(keys), torch.cat(values)))
        masks = [F.pad(self.mask, (new_length - self.length, 0))] if self.size else []
        for r in rows:
            row_mask = torch.zeros(1, new_length, dtype=torch.long, device=self.device)
            row_mask[0, new_length - r.length :] = 1
            masks.append(row_mask)
        self.mask = torch.cat(masks)
        self.positions = torch.cat(
            [self.positions, torch.tensor([r.length for r in rows], dtype=torch.long, device=self.device)]
        )
        self.cache = DynamicCache(ddp_cache_data=merged)

    def keep(self, indices: list[int]) -> None:
        """Keep only the rows at these indices (in this order), then trim columns that are padding in every row."""
        if len(indices) == self.size:
            return
        if not indices:
            self.cache = None
            self.mask = torch.zeros(0, 0, dtype=torch.long, device=self.device)
            self.positions = torch.zeros(0, dtype=torch.long, device=self.device)
            return
        index = torch.tensor(indices, dtype=torch.long, device=self.device)
        mask = self.mask.index_select(0, index)
        first_real = int(mask.any(dim=0).long().argmax())
        self.mask = mask[:, first_real:]
        self.positions = self.positions.index_select(0, index)
        layers = [
            (k.index_select(0, index)[:, :, first_real:], v.index_select(0, index)[:, :, first_real:])
            for k, v in self._layers()
        ]
        self.cache = DynamicCache(ddp_cache_data=layers)

    @torch.no_grad()
    def step(self, next_tokens: list[int]) -> torch.Tensor:
        """Feed one token per row (the token each row sampled last) and return the next logits, [rows, vocab]."""
        assert self.cache is not None and len(next_tokens) == self.size
        ids = torch.tensor(next_tokens, dtype=torch.long, device=self.device).unsqueeze(1)
        self.mask = F.pad(self.mask, (0, 1), value=1)
        out = self.model(
            input_ids=ids,
            attention_mask=self.mask,
            position_ids=self.positions.unsqueeze(1),
            past_key_values=self.cache,
            use_cache=True,
        )
        self.cache = out.past_key_values
        self.positions = self.positions + 1
        return out.logits[:, -1]

    def _layers(self) -> list[LayerKV]:
        if self.cache is None:
            return []
        return [(layer.keys, layer.values) for layer in self.cache.layers]


def _left_pad(t: torch.Tensor, length: int) -> torch.Tensor:
    return F.pad(t, (0, 0, length - t.shape[-2], 0))
