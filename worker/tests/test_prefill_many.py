"""The embedded engine's batched prefill (embedded_server/kv_batch.py, DecodeBatch.prefill_many): prompts of different
lengths, some with a cached prefix of different lengths and some without, run in one pass, must give each prompt the
logits after its last token and the key/value of a plain forward pass over it alone; the groups must respect their
padding and memory bounds, and keep every prompt."""

from __future__ import annotations

import torch

from agentrl_worker.embedded_server import kv_batch
from agentrl_worker.embedded_server.kv_batch import DecodeBatch, PrefillRequest, _prefill_groups

from test_embedded_server import _reference_model

# tiny_models: conftest.py's sharpened checkpoints (attention and logits scaled up so that a position, mask or padding
# bug moves the logits far beyond the tolerance).
TOLERANCE = 1e-4


def _prompt(seed: int, length: int) -> list[int]:
    return [(7 * seed + 13 * i) % 900 + 10 for i in range(length)]


def _forward(model, ids: list[int]) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    with torch.no_grad():
        out = model(torch.tensor([ids]), use_cache=True)
    return out.logits[0, -1], [(layer.keys, layer.values) for layer in out.past_key_values.layers]


def test_one_pass_over_mixed_lengths_and_caches_equals_each_prompt_alone(tiny_models, monkeypatch):
    model = _reference_model(tiny_models[0])
    batch = DecodeBatch(model, torch.device("cpu"))
    # (prompt length, cached prefix length): no cache, short and long caches, new parts of 1 to 12 tokens.
    shapes = [(9, 0), (12, 0), (20, 16), (33, 32), (40, 32), (17, 16), (26, 16), (30, 0)]
    requests = []
    for seed, (length, cached) in enumerate(shapes):
        ids = _prompt(seed, length)
        kv = _forward(model, ids[:cached])[1] if cached else []
        requests.append(PrefillRequest(ids, [(k[:, :, :cached], v[:, :, :cached]) for k, v in kv], cached))
    passes = []
    forward = model.forward
    monkeypatch.setattr(model, "forward", lambda *a, **k: passes.append(k["input_ids"].shape) or forward(*a, **k))
    results = batch.prefill_many(requests)
    monkeypatch.undo()
    # Fewer passes than prompts, and at least one of them mixes rows of different lengths and caches.
    assert len(passes) < len(requests)
    assert max(shape[0] for shape in passes) >= 3
    assert len(results) == len(requests)
    for request, result in zip(requests, results):
        logits, kv = _forward(model, request.input_ids)
        assert result.length == len(request.input_ids)
        assert float((result.last_logits - logits).abs().max()) < TOLERANCE
        for (k, v), (rk, rv) in zip(kv, result.kv):
            assert rk.shape == k.shape and rv.shape == v.shape
            assert float((rk - k).abs().max()) < TOLERANCE and float((rv - v).abs().max()) < TOLERANCE


def test_groups_bound_padding_and_memory_and_keep_every_prompt(monkeypatch):
    def request(length: int, start: int = 0) -> PrefillRequest:
        return PrefillRequest(list(range(length)), [], start)

    # A prompt whose padding would exceed its own new tokens plus 16 goes to a later group.
    groups = _prefill_groups([request(100), request(60), request(30), request(90, 80)], vocab=64)
    assert groups == [[0, 1], [2, 3]]
    # The logits budget: rows × distinct last positions × vocabulary.
    monkeypatch.setattr(kv_batch, "LOGITS_BUDGET", 3 * 64)
    assert _prefill_groups([request(10)] * 4, vocab=64) == [[0, 1, 2], [3]]
    assert _prefill_groups([request(10), request(9), request(10)], vocab=64) == [[0, 2], [1]]
    # A prompt over every budget alone still runs, alone.
    monkeypatch.setattr(kv_batch, "ATTENTION_BUDGET", 10)
    assert _prefill_groups([request(50), request(50)], vocab=64) == [[0], [1]]
