"""The embedded engine's prefix cache (embedded_server/prefix_cache.py): what it matches and evicts, and, over real
HTTP, that a conversation's next turn prefills only its new tokens yet reports the logprobs of a full forward pass."""

from __future__ import annotations

import pytest
import torch

from agentrl_worker.embedded_server import ServerConfig, load_model, start_server
from agentrl_worker.embedded_server.prefix_cache import BLOCK, PrefixCache

from test_embedded_server import LOGPROB_TOLERANCE, _reference_model, call, generate, max_logprob_error

# tiny_models: conftest.py's, the checkpoints test_embedded_server.py serves, built once per session.


def _kv(length: int, layers: int = 2) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Key/values whose every value is its position, so a slice shows which positions it kept."""
    pos = torch.arange(length, dtype=torch.float32).view(1, 1, length, 1).expand(1, 2, length, 4).contiguous()
    return [(pos.clone(), pos.clone()) for _ in range(layers)]


def _bytes(length: int) -> int:
    return sum(k.numel() * 4 + v.numel() * 4 for k, v in _kv(length))


def test_lookup_reuses_whole_blocks_of_the_longest_cached_prefix_and_leaves_a_token_to_run():
    cache = PrefixCache(1 << 20)
    system = list(range(40))
    cache.insert(system + [100, 101, 102], _kv(43))
    length, kv = cache.lookup(system + [7, 8, 9, 10])
    assert length == 2 * BLOCK  # 40 shared tokens: two whole blocks
    assert kv[0][0].shape == (1, 2, 2 * BLOCK, 4) and kv[1][1][0, 0, -1, 0].item() == 2 * BLOCK - 1
    assert cache.lookup(list(range(3 * BLOCK)))[0] == 2 * BLOCK  # the third block is not cached
    cache.insert(list(range(3 * BLOCK)), _kv(3 * BLOCK))
    # The whole sequence is cached, but the logits after its last token are needed: one block less.
    assert cache.lookup(list(range(3 * BLOCK)))[0] == 2 * BLOCK
    assert cache.lookup(list(range(3 * BLOCK + 1)))[0] == 3 * BLOCK
    assert cache.lookup([5] + system)[0] == 0
    assert cache.lookup(system[:BLOCK])[0] == 0


def test_least_recently_used_sequences_go_first_once_over_budget_and_clear_empties():
    cache = PrefixCache(2 * _bytes(2 * BLOCK))
    a, b, c = ([tag] * (2 * BLOCK) for tag in (1, 2, 3))
    cache.insert(a, _kv(2 * BLOCK))
    cache.insert(b, _kv(2 * BLOCK))
    assert cache.lookup(a + [0])[0] == 2 * BLOCK  # a is now the most recently used
    cache.insert(c, _kv(2 * BLOCK))
    assert len(cache) == 2 and cache.bytes <= cache.max_bytes
    assert cache.lookup(b + [0])[0] == 0 and cache.lookup(a + [0])[0] == cache.lookup(c + [0])[0] == 2 * BLOCK
    cache.clear()
    assert len(cache) == 0 and cache.bytes == 0 and cache.lookup(a + [0])[0] == 0
    assert PrefixCache(0).lookup(a + [0])[0] == 0  # a budget of 0 is the cache turned off


def test_a_hash_collision_never_serves_another_prefix(monkeypatch):
    cache = PrefixCache(1 << 20)
    cache.insert([1] * (2 * BLOCK), _kv(2 * BLOCK))
    import agentrl_worker.embedded_server.prefix_cache as module

    monkeypatch.setattr(module, "hash", lambda value: 42, raising=False)  # every block run hashes alike
    cache.insert([3] * (2 * BLOCK), _kv(2 * BLOCK))  # seen as cached already: not inserted
    assert cache.lookup([2] * (2 * BLOCK) + [0])[0] == 0


@pytest.fixture(scope="module")
def servers(tiny_models):
    cached = start_server(load_model(str(tiny_models[0])), ServerConfig(port=0))
    uncached = start_server(load_model(str(tiny_models[0])), ServerConfig(port=0, prefix_cache_bytes=0))
    yield cached, uncached
    cached.shutdown()
    uncached.shutdown()


def test_the_next_turn_of_a_conversation_prefills_only_its_new_tokens(servers, tiny_models):
    cached, uncached = servers
    reference = _reference_model(tiny_models[0])
    prompt = [(7 * i + 3) % 1000 + 10 for i in range(45)]
    first = generate(cached, prompt, max_new_tokens=20, temperature=0, ignore_eos=True)
    assert first["meta_info"]["cached_tokens"] == 0
    # The agent appends the model's turn and a tool answer, and sends the whole history back.
    history = prompt + first["output_ids"] + [11, 12, 13, 14, 15]
    second = generate(cached, history, max_new_tokens=20, temperature=0.8, sampling_seed=3, ignore_eos=True)
    # The first turn's prompt and its sampled tokens but the last, which the engine never fed, in whole blocks.
    assert second["meta_info"]["cached_tokens"] == (len(prompt) + 20 - 1) // BLOCK * BLOCK
    assert max_logprob_error(reference, history, second, 0.8) < LOGPROB_TOLERANCE
    # Greedy, the cache changes nothing (sampled, float rounding can move a draw that falls on a boundary).
    greedy = generate(cached, history, max_new_tokens=20, temperature=0, ignore_eos=True)
    plain = generate(uncached, history, max_new_tokens=20, temperature=0, ignore_eos=True)
    assert greedy["meta_info"]["cached_tokens"] > 0 and plain["meta_info"]["cached_tokens"] == 0
    assert plain["output_ids"] == greedy["output_ids"]
    server_info = call(cached, "/get_server_info")[1]["internal_states"][0]
    assert server_info["prefix_cache_hit_tokens"] >= second["meta_info"]["cached_tokens"]

    assert call(cached, "/flush_cache", method="POST")[0] == 200
    again = generate(cached, history, max_new_tokens=20, temperature=0, ignore_eos=True)
    assert again["meta_info"]["cached_tokens"] == 0 and again["output_ids"] == greedy["output_ids"]
