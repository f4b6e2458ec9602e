"""The 2-rank CPU worker (torchrun, gloo, FSDP2) driven over its socket as the CLI drives it.

The tests share one worker and run in file order: invariant, learning, export, resume, the weight-sync plan (moved
here from test_weight_sync.py, so that it needs no 2-rank worker of its own), errors, then the socket close.
"""

from __future__ import annotations

import json
import os
import time

import pytest
import torch
from safetensors.torch import load_file

from agentrl_worker.algos import log_probs_and_entropy
from agentrl_worker.make_tiny import make_tiny

from worker_harness import TOKENIZER_DIR, WorkerProcess, build_batch

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("worker")
    model = make_tiny(TOKENIZER_DIR, layers=2, hidden=32, out=root / "tiny", seed=1)
    batch = build_batch(root / "batch.safetensors")
    worker = WorkerProcess(2, root)
    try:
        reply = worker.ok(
            "init",
            config={"model_path": str(model), "use_ref": True, "use_kl_loss": True, "kl_loss_coef": 0.01,
                    "lr": 1e-3, "micro_batch_token_budget": 300, "temperature": 0.9, "seed": 3},
        )
        assert reply["world_size"] == 2 and reply["fsdp"] == "fsdp2"
        yield {"root": root, "model": model, "batch": batch, "worker": worker, "batch_path": str(root / "batch.safetensors")}
    finally:
        worker.close()


def test_first_step_is_on_policy_ratio_one_and_kl_zero(env):
    w, root = env["worker"], env["root"]
    reply = w.ok("compute_log_probs", batch=env["batch_path"], out=str(root / "lp0.safetensors"))
    lp = load_file(root / "lp0.safetensors")
    attention, response = env["batch"]["attention_mask"], env["batch"]["response_mask"]
    assert lp["old_log_probs"].shape == attention.shape
    # The reference is the initial policy, so its log-probs are the same bits.
    assert torch.equal(lp["old_log_probs"], lp["ref_log_probs"])
    assert (lp["old_log_probs"][response == 0] == 0).all() and (lp["entropy"][response == 0] == 0).all()
    assert (lp["old_log_probs"][response == 1] < 0).all()
    assert reply["metrics"]["actor/entropy"] > 0
    metrics = w.ok("update", batch=env["batch_path"], log_probs=str(root / "lp0.safetensors"))["metrics"]
    env["first_update"] = metrics
    assert metrics["actor/ratio_max"] == 1.0 and metrics["actor/ratio_min"] == 1.0
    assert metrics["actor/ppo_kl"] == 0.0 and metrics["actor/pg_clipfrac"] == 0.0
    assert metrics["actor/kl_loss"] == 0.0
    assert metrics["actor/grad_norm"] > 0 and metrics["actor/optimizer_steps"] == 1
    _check_timings(reply["metrics"], metrics)


def _check_timings(log_probs: dict[str, float], update: dict[str, float]) -> None:
    """Both replies time their parts (the step budget): present, non-negative, and only the command's own parts."""
    parts = {
        "compute_log_probs": (log_probs, ("batch_read", "old_log_prob_actor", "ref", "log_prob_save")),
        "update": (update, ("batch_read", "forward_backward", "optimizer")),
    }
    for command, (metrics, names) in parts.items():
        for name in names:
            assert metrics[f"timing_s/{name}"] >= 0, f"{command}: timing_s/{name}"
        assert sorted(k for k in metrics if k.startswith("timing_s/")) == sorted(f"timing_s/{n}" for n in names), command
    # The forwards ran, so they took some time.
    assert log_probs["timing_s/old_log_prob_actor"] > 0 and update["timing_s/forward_backward"] > 0


def _untimed(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not k.startswith("timing_s/")}


def _response_log_probs(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """log_softmax(logits / 0.9) at each response token, from one plain transformers forward of the whole batch:
    [B, T - 1], aligned with input_ids[:, 1:], 0 at the other positions. The lm_head runs only on the hidden states
    that predict a response token (the 151,936-token vocabulary makes it most of the cost, and every other position is
    masked out of all that is compared)."""
    ids, mask = batch["input_ids"], batch["response_mask"][:, 1:].bool()
    hidden = model.model(input_ids=ids, attention_mask=batch["attention_mask"]).last_hidden_state[:, :-1]
    picked, _ = log_probs_and_entropy(model.lm_head(hidden[mask]), ids[:, 1:][mask], 0.9)
    return torch.zeros(mask.shape).masked_scatter(mask, picked)


def test_sharded_update_matches_a_plain_pytorch_gradient(env):
    """The 2-rank, micro-batched update must see the gradient of the token-mean loss over the whole batch: recompute
    it without FSDP in this process and compare the loss and the pre-clip gradient norm the worker reported."""
    from transformers import AutoModelForCausalLM

    from agentrl_worker.algos import agg_loss, grpo_advantages, kl_penalty, policy_loss

    batch = env["batch"]
    model = AutoModelForCausalLM.from_pretrained(env["model"], dtype=torch.float32)
    logp = _response_log_probs(model, batch)
    mask = batch["response_mask"][:, 1:]
    old = logp.detach()
    adv = grpo_advantages(batch["rewards"], batch["group_ids"])
    pg, _ = policy_loss(logp, old, adv, mask)
    loss = pg + 0.01 * agg_loss(kl_penalty(logp, old, "low_var_kl"), mask, "token-mean")
    loss.backward()
    grad_norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters() if p.grad is not None)).item()
    first = env["first_update"]
    assert first["actor/pg_loss"] == pytest.approx(pg.item(), rel=1e-4, abs=1e-6)
    assert first["actor/grad_norm"] == pytest.approx(grad_norm, rel=1e-3)


def test_loss_decreases_on_a_fixed_batch(env):
    # The first update (test_first_step_is_on_policy_ratio_one_and_kl_zero) ran on the same batch and log-probs: its
    # loss is the first of three, at the initial weights.
    w, root = env["worker"], env["root"]
    losses = [env["first_update"]["actor/pg_loss"]]
    losses += [w.ok("update", batch=env["batch_path"], log_probs=str(root / "lp0.safetensors"))["metrics"]["actor/pg_loss"] for _ in range(2)]
    assert losses[0] > losses[1] > losses[2], losses


def test_saved_weights_load_in_transformers_with_the_workers_logits(env):
    from transformers import AutoModelForCausalLM

    w, root = env["worker"], env["root"]
    w.ok("save_weights", dir=str(root / "hf"))
    w.ok("compute_log_probs", batch=env["batch_path"], out=str(root / "lp1.safetensors"))
    worker_lp = load_file(root / "lp1.safetensors")["old_log_probs"]
    model = AutoModelForCausalLM.from_pretrained(root / "hf", dtype=torch.float32)
    batch = env["batch"]
    with torch.no_grad():
        lp = _response_log_probs(model, batch)
    # The worker computes log-probs at response tokens only (0 elsewhere).
    on = batch["response_mask"][:, 1:] == 1
    assert (worker_lp[:, 1:][~on] == 0).all()
    assert torch.allclose(lp[on], worker_lp[:, 1:][on], atol=1e-4)
    # ...and differ from the initial model's, so the comparison can fail.
    initial = load_file(root / "lp0.safetensors")["old_log_probs"]
    assert not torch.allclose(initial[:, 1:][on], worker_lp[:, 1:][on], atol=1e-4)
    assert sorted(p.name for p in (root / "hf").iterdir()) == sorted(p.name for p in env["model"].iterdir())


def test_checkpoint_round_trip_is_bit_identical(env):
    w, root = env["worker"], env["root"]
    w.ok("save_checkpoint", dir=str(root / "ckpt"))
    saved = w.ok("fingerprint")
    after = w.ok("update", batch=env["batch_path"], log_probs=str(root / "lp0.safetensors"))
    moved = w.ok("fingerprint")
    assert moved["params"] != saved["params"] and moved["optimizer"] != saved["optimizer"]
    w.ok("load_checkpoint", dir=str(root / "ckpt"))
    restored = w.ok("fingerprint")
    assert (restored["params"], restored["optimizer"], restored["step"]) == (saved["params"], saved["optimizer"], saved["step"])
    again = w.ok("update", batch=env["batch_path"], log_probs=str(root / "lp0.safetensors"))
    # Everything but the timings, which are wall clock.
    assert _untimed(again["metrics"]) == _untimed(after["metrics"])
    assert w.ok("fingerprint")["params"] == moved["params"]


def test_a_two_rank_plan_names_every_parameter_whole_and_a_broadcast_needs_the_group(env):
    """Each rank holds half of every parameter, yet the weight-sync plan must give the full shapes (the servers allocate
    what it says), cover every parameter once, and bound every bucket of more than one tensor."""
    from transformers import AutoModelForCausalLM

    w = env["worker"]
    buckets = w.ok("plan_weight_buckets", bucket_bytes=256 * 1024)["buckets"]
    planned = {n: s for b in buckets for n, s in zip(b["names"], b["shapes"])}
    full = AutoModelForCausalLM.from_pretrained(str(env["model"]), dtype=torch.float32)
    assert planned == {n: list(p.shape) for n, p in full.named_parameters()}
    assert sum(len(b["names"]) for b in buckets) == len(planned)
    assert all(b["dtypes"] == ["float32"] * len(b["names"]) for b in buckets)
    sizes = [sum(4 * _numel(s) for s in b["shapes"]) for b in buckets if len(b["names"]) > 1]
    assert sizes and max(sizes) <= 256 * 1024

    refused = w.call("broadcast_weights", names=buckets[0]["names"])
    assert refused["ok"] is False and refused["error"]["type"] == "InputError"
    assert "init_weights_group first" in refused["error"]["message"]


def _numel(shape: list[int]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count


def test_errors_are_structured_replies_and_the_worker_keeps_serving(env):
    w, root = env["worker"], env["root"]
    bad = w.call("update", batch=str(root / "missing.safetensors"))
    assert bad["ok"] is False and bad["error"]["type"] == "InputError" and "missing.safetensors" in bad["error"]["message"]
    unknown = w.call("train_everything")
    assert unknown["ok"] is False and "unknown command" in unknown["error"]["message"]
    no_old = w.call("update", batch=env["batch_path"])
    assert no_old["ok"] is False and "old_log_probs" in no_old["error"]["message"]
    w.conn.sendall(b"this is not json\n")
    garbled = json.loads(w.reader.readline())
    assert garbled["id"] is None and garbled["ok"] is False and garbled["error"]["type"] == "ProtocolError"
    assert w.ok("fingerprint")["step"] >= 1


def test_closing_the_socket_stops_every_rank(env):
    w = env["worker"]
    w.conn.shutdown(2)
    w.conn.close()
    assert w.proc.wait(timeout=60) == 0, w.log_tail()
    # start_new_session made torchrun the leader of a process group holding both ranks: it must now be empty.
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.killpg(w.proc.pid, 0)
