"""The rows that decode together, sharing one forward pass per step over a left-padded KV cache.

Each layer's cache is one [rows, kv_heads, length, head_dim] tensor. A row's real tokens sit at the right end of it;
the columns to their left are zero padding, hidden by the attention mask. Prompts are prefilled together, a group of
them per forward pass (`prefill_many`), then joined to the batch between steps by left-padding both sides to one
length; finished rows are dropped with an index select, and columns that became padding in every row are trimmed.
Positions are passed explicitly, so a row's rotary positions are 0..n-1 whatever padding precedes it, and its logits
match a plain forward pass over its tokens.
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


@dataclass
class PrefillRequest:
    """A prompt to prefill, and the key/value of its first `start` tokens from the prefix cache ([] when none)."""

    input_ids: list[int]
    cached: list[LayerKV]
    start: int


class DecodeBatch:
    def __init__(self, model: torch.nn.Module, device: torch.device):
        self.model = model
        self.device = device
        config = model.config
        self.vocab = int(getattr(config, "vocab_size", None) or config.get_text_config().vocab_size)
        self.cache: DynamicCache | None = None
        self.mask = torch.zeros(0, 0, dtype=torch.long, device=device)  # [rows, length], 1 on real tokens
        self.positions = torch.zeros(0, dtype=torch.long, device=device)  # [rows], position of the next input token

    @property
    def size(self) -> int:
        return int(self.positions.shape[0])

    @property
    def length(self) -> int:
        return int(self.mask.shape[1])

    def prefill(self, input_ids: list[int], cached: list[LayerKV] | None = None, start: int = 0) -> Prefilled:
        """Runs a prompt; with `cached`, the key/value of its first `start` tokens (prefix_cache.py), only the rest."""
        return self.prefill_many([PrefillRequest(input_ids, cached or [], start)])[0]

    @torch.no_grad()
    def prefill_many(self, requests: list[PrefillRequest]) -> list[Prefilled]:
        """Runs prompts together, one forward pass per group of `_prefill_groups` instead of one per prompt (each pass
        walks every layer's Python, which on a small model costs more than its arithmetic); returns each prompt's
        Prefilled in the requests' order.

        A group's rows are laid out as in the decode batch: each row's cached key/value left-padded to the group's
        longest, its new tokens after them, right-padded to the group's widest. Real tokens never attend to padding
        (the mask hides the left, causality the right), and every padding query has real tokens before it, so no
        attention row is fully masked. Only the columns where some row's last token sits get logits."""
        results: list[Prefilled | None] = [None] * len(requests)
        for group in _prefill_groups(requests, self.vocab):
            rows = [requests[i] for i in group]
            news = [len(r.input_ids) - r.start for r in rows]
            past, width = max(r.start for r in rows), max(news)
            padded = [r.input_ids[r.start :] + [0] * (width - n) for r, n in zip(rows, news)]
            ids = torch.tensor(padded, dtype=torch.long, device=self.device)
            starts = torch.tensor([r.start for r in rows], dtype=torch.long, device=self.device)
            positions = starts.unsqueeze(1) + torch.arange(width, dtype=torch.long, device=self.device)
            mask = None
            if any(r.start != past for r in rows) or any(n != width for n in news):
                mask = torch.zeros(len(rows), past + width, dtype=torch.long, device=self.device)
                for row, (r, n) in enumerate(zip(rows, news)):
                    mask[row, past - r.start : past + n] = 1
            cache = DynamicCache()
            if past:  # a row alone needs no padding: its cached key/value as they are, as the per-prompt prefill had
                cache = DynamicCache(ddp_cache_data=rows[0].cached if len(rows) == 1 else _padded_past(rows, past))
            lasts = sorted({n - 1 for n in news})
            keep = 1 if lasts == [width - 1] else torch.tensor(lasts, dtype=torch.long, device=self.device)
            out = self.model(input_ids=ids, attention_mask=mask, past_key_values=cache, position_ids=positions,
                             use_cache=True, logits_to_keep=keep)
            kv = [(layer.keys, layer.values) for layer in out.past_key_values.layers]
            for row, (i, r, n) in enumerate(zip(group, rows, news)):
                first, end = past - r.start, past + n  # this row's real columns
                # Copies, so that the prefix cache and the decode batch do not keep the whole group's tensors alive.
                row_kv = kv if len(rows) == 1 else [
                    (k[row : row + 1, :, first:end].clone(), v[row : row + 1, :, first:end].clone()) for k, v in kv
                ]
                logits = out.logits[row, lasts.index(n - 1)]
                results[i] = Prefilled(kv=row_kv, last_logits=logits, length=len(r.input_ids))
        return [r for r in results if r is not None]

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


# A group's bounds: the float32 logits it keeps (rows × distinct last positions × vocabulary), and its attention's
# query-key pairs per head (rows × width × (past + width)), about what one prompt of 2,000 tokens costs alone.
LOGITS_BUDGET = 1 << 24
ATTENTION_BUDGET = 1 << 22


def _padded_past(rows: list[PrefillRequest], past: int) -> list[LayerKV]:
    """Per layer, the rows' cached keys and values left-padded with zeros to `past` columns and stacked,
    [rows, kv_heads, past, head_dim]; a row without cache is all padding."""
    template = next(r.cached for r in rows if r.start)
    layers = []
    for layer, (k0, _) in enumerate(template):
        sides = []
        for side in (0, 1):
            sides.append(torch.cat([
                _left_pad(r.cached[layer][side], past) if r.start else k0.new_zeros(1, k0.shape[1], past, k0.shape[3])
                for r in rows
            ]))
        layers.append((sides[0], sides[1]))
    return layers


def _prefill_groups(requests: list[PrefillRequest], vocab: int) -> list[list[int]]:
    """Splits prompts into groups that share a pass, longest new part first. A prompt joins the open group when its
    padding stays under its own new tokens plus 16 and the group stays within the budgets above; the rest form the
    next groups. A group's first prompt always fits, so every prompt runs."""
    new = [len(r.input_ids) - r.start for r in requests]
    order = sorted(range(len(requests)), key=lambda i: new[i], reverse=True)
    groups = []
    while order:
        width = new[order[0]]
        group, lasts, past, rest = [], set(), 0, []
        for i in order:
            rows, grown_past, grown_lasts = len(group) + 1, max(past, requests[i].start), lasts | {new[i]}
            fits = (width - new[i] <= new[i] + 16
                    and rows * len(grown_lasts) * vocab <= LOGITS_BUDGET
                    and rows * width * (grown_past + width) <= ATTENTION_BUDGET)
            if fits or not group:
                group.append(i)
                lasts, past = grown_lasts, grown_past
            else:
                rest.append(i)
        groups.append(group)
        order = rest
    return groups
