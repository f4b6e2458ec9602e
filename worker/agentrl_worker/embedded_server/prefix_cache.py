"""The embedded engine's prefix cache: the key/value cache of token sequences it has already run, so that a prompt that
starts with one of them prefills only its new tokens (what SGLang's radix cache does; `--disable-radix-cache` turns
both off).

A multi-turn trajectory sends, at every turn, its whole history: the previous turn's prompt and sampled tokens, then
the tool's answer. Without a cache each turn re-runs the whole history, one prompt at a time. Kept here: every prompt's
prefill and every finished generation's sequence (prompt + sampled tokens it fed back), matched in blocks of
`BLOCK` tokens through a hash chain (as vLLM's prefix caching matches blocks): a request reuses the longest run of
whole blocks some cached sequence shares with it, which also covers a system prompt every row starts with. Least
recently used sequences go first once the cache holds more than its byte budget. Weight updates and /flush_cache empty
it: a cached key/value was computed by the weights of its time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch

# Per layer (keys, values), each [1, kv_heads, length, head_dim].
LayerKV = tuple[torch.Tensor, torch.Tensor]
BLOCK = 16


@dataclass
class _Entry:
    tokens: tuple[int, ...]
    kv: list[LayerKV]
    hashes: list[int]  # the chain hash after each whole block
    nbytes: int


class PrefixCache:
    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits_tokens = 0  # prompt tokens served from the cache since start (for /get_server_info)
        self._entries: OrderedDict[int, _Entry] = OrderedDict()  # by id, least recently used first
        self._by_hash: dict[int, int] = {}  # chain hash of a block run -> the entry id that holds it
        self._next_id = 0
        self._lock = threading.Lock()

    def lookup(self, tokens: list[int]) -> tuple[int, list[LayerKV]]:
        """The longest cached prefix of `tokens`, in whole blocks, leaving at least one token to run (the logits after
        the last token are needed): its length and its key/value views, or (0, [])."""
        with self._lock:
            best, entry_id, chain = 0, None, 0
            limit = (len(tokens) - 1) // BLOCK * BLOCK
            for end in range(BLOCK, limit + 1, BLOCK):
                chain = hash((chain, tuple(tokens[end - BLOCK : end])))
                found = self._by_hash.get(chain)
                if found is None:
                    break
                best, entry_id = end, found
            if entry_id is None:
                return 0, []
            entry = self._entries[entry_id]
            if entry.tokens[:best] != tuple(tokens[:best]):  # a hash collision: never serve another prefix's cache
                return 0, []
            self._entries.move_to_end(entry_id)
            self.hits_tokens += best
            return best, [(k[:, :, :best], v[:, :, :best]) for k, v in entry.kv]

    def insert(self, tokens: list[int], kv: list[LayerKV]) -> None:
        """Keeps the key/value cache of `tokens` ([1, kv_heads, len(tokens), head_dim] per layer; the cache keeps
        these tensors, so the caller must not write into them)."""
        if len(tokens) < BLOCK or self.max_bytes <= 0:
            return
        nbytes = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        if nbytes > self.max_bytes:
            return
        hashes, chain = [], 0
        for end in range(BLOCK, len(tokens) + 1, BLOCK):
            chain = hash((chain, tuple(tokens[end - BLOCK : end])))
            hashes.append(chain)
        with self._lock:
            holder = self._by_hash.get(hashes[-1])
            if holder is not None:  # its whole blocks are cached already (lookups use whole blocks only)
                self._entries.move_to_end(holder)
                return
            entry_id, self._next_id = self._next_id, self._next_id + 1
            self._entries[entry_id] = _Entry(tuple(tokens), kv, hashes, nbytes)
            for h in hashes:
                self._by_hash[h] = entry_id  # the newest holder: the one evicted last
            self.bytes += nbytes
            while self.bytes > self.max_bytes:
                self._evict_oldest()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._by_hash.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def _evict_oldest(self) -> None:
        entry_id, entry = self._entries.popitem(last=False)
        self.bytes -= entry.nbytes
        for h in entry.hashes:
            if self._by_hash.get(h) == entry_id:
                # Another entry may hold the same blocks; it is found again once it is inserted or touched anew.
                del self._by_hash[h]
