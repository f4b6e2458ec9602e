"""The embedded engine's sampling rules, on hand-made logits (no model).

Pins SGLang's conventions the rollout relies on: temperature below 1e-6 is greedy and reports log_softmax of the raw
logits; sampled tokens report log_softmax(logits / T) over the full vocabulary even when top-p/top-k narrowed the draw;
a seeded row draws the same token whatever shares its batch; invalid parameters are RequestErrors (HTTP 400).
"""

from __future__ import annotations

import pytest
import torch

from agentrl_worker.embedded_server.sampling import (
    RequestError,
    SamplingParams,
    choose_tokens,
    filter_top_k_top_p,
    parse_sampling_params,
    sampling_logprobs,
    top_alternatives,
)


def test_defaults_follow_sglang_and_null_falls_back():
    params = parse_sampling_params({"temperature": None, "max_new_tokens": 7})
    assert params == SamplingParams(max_new_tokens=7)
    assert params.skip_special_tokens is True and params.temperature == 1.0 and params.top_k == -1


def test_stop_accepts_a_string_or_a_list_and_seed_either_name():
    assert parse_sampling_params({"stop": "END"}).stop == ("END",)
    assert parse_sampling_params({"stop": ["a", "b"], "sampling_seed": 3}).seed == 3
    assert parse_sampling_params({"seed": 4}).seed == 4


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": 0}, "top_k"),
        ({"n": 0}, "n must be"),
        ({"max_new_tokens": -1}, "max_new_tokens"),
        ({"temperature": "hot"}, "temperature must be number"),
        ({"stop_token_ids": [1, "2"]}, "stop_token_ids"),
        ({"stop": [""]}, "stop strings"),
        ({"bogus": 1}, "unknown keys: bogus"),
        ([1], "must be an object"),
    ],
)
def test_invalid_params_are_request_errors(raw, message):
    with pytest.raises(RequestError, match=message.replace("(", r"\(")):
        parse_sampling_params(raw)


def test_top_k_and_top_p_keep_the_expected_tokens_and_renormalise():
    probs = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05])
    assert torch.allclose(filter_top_k_top_p(probs, 2, 1.0), torch.tensor([0.5, 0.2, 0, 0, 0]) / 0.7)
    # Mass above token 2 is 0.7 < 0.8, so it is kept; above token 3 it is 0.85, so token 3 goes.
    assert torch.allclose(filter_top_k_top_p(probs, -1, 0.8), torch.tensor([0.5, 0.2, 0.15, 0, 0]) / 0.85)
    assert torch.equal(filter_top_k_top_p(probs, -1, 0.01), torch.tensor([1.0, 0, 0, 0, 0]))
    assert filter_top_k_top_p(probs, -1, 1.0) is probs


def test_greedy_reports_the_raw_log_softmax():
    logits = torch.tensor([[1.0, 3.0, 2.0]])
    tokens, logprobs = choose_tokens(logits, [SamplingParams(temperature=0.0)], [None])
    assert tokens == [1]
    assert logprobs[0] == pytest.approx(float(torch.log_softmax(logits[0], 0)[1]), abs=1e-6)


def test_sampled_logprob_is_temperature_scaled_and_not_renormalised_by_top_k():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]])
    params = SamplingParams(temperature=0.5, top_k=2)
    expected = torch.log_softmax(logits[0] / 0.5, 0)
    for seed in range(20):
        (token,), (logprob,) = choose_tokens(logits, [params], [torch.Generator().manual_seed(seed)])
        assert token in (0, 1)
        assert logprob == pytest.approx(float(expected[token]), abs=1e-6)


def test_sampling_frequencies_follow_the_tempered_distribution():
    logits = torch.tensor([[0.0, 1.0, 2.0]])
    params = SamplingParams(temperature=2.0)
    generator = torch.Generator().manual_seed(0)
    counts = torch.zeros(3)
    for _ in range(3000):
        (token,), _ = choose_tokens(logits, [params], [generator])
        counts[token] += 1
    expected = torch.softmax(logits[0] / 2.0, 0)
    assert torch.allclose(counts / 3000, expected, atol=0.03)


def test_a_seeded_row_draws_the_same_tokens_whatever_shares_its_batch():
    torch.manual_seed(0)
    logits = torch.randn(4, 50)
    params = [SamplingParams(temperature=1.0), SamplingParams(temperature=0.0), SamplingParams(temperature=0.7, top_p=0.9),
              SamplingParams(temperature=1.0)]
    alone = choose_tokens(logits[2:3], [params[2]], [torch.Generator().manual_seed(11)])
    together = choose_tokens(logits, params, [torch.Generator().manual_seed(s) for s in (1, 2, 11, 3)])
    assert together[0][2] == alone[0][0] and together[1][2] == pytest.approx(alone[1][0])


def test_top_alternatives_are_the_most_likely_tokens_of_the_distribution_the_logprobs_come_from():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0], [0.0, 3.0, 1.0, 2.0], [1.0, 1.0, 1.0, 1.0]])
    params = [SamplingParams(temperature=0.5), SamplingParams(temperature=0.0), SamplingParams()]
    tops = top_alternatives(sampling_logprobs(logits, params), [3, 2, 0])
    tempered = torch.log_softmax(logits[0] / 0.5, 0)
    assert [t for _, t in tops[0]] == [0, 1, 2]
    assert [lp for lp, _ in tops[0]] == pytest.approx(tempered[[0, 1, 2]].tolist(), abs=1e-6)
    # Greedy rows report the raw log_softmax, as their sampled token's logprob does.
    assert [t for _, t in tops[1]] == [1, 3]
    assert [lp for lp, _ in tops[1]] == pytest.approx(torch.log_softmax(logits[1], 0)[[1, 3]].tolist(), abs=1e-6)
    assert tops[2] is None
    # The sampled token's own logprob is the same number its alternative entry reports.
    (token,), (logprob,) = choose_tokens(logits[:1], params[:1], [torch.Generator().manual_seed(3)])
    assert dict((t, lp) for lp, t in top_alternatives(sampling_logprobs(logits[:1], params[:1]), [4])[0])[token] == pytest.approx(logprob, abs=1e-6)
