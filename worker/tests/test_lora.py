"""LoRA (issue 30): the worker's adapter update against a plain peft model, the reference as the adapter disabled, the
merged export and the adapter folder, the merged weight names the servers get, and a bit-identical resume.

One in-process rank (the plain model: share_prefix runs under gradients through the peft wrapper), the tiny model and
batch of test_update_gradient.py.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from agentrl_worker import lora
from agentrl_worker.trainer import Trainer

from test_update_gradient import _config, _full, _plain_forward, _reference, env  # noqa: F401  (env is a fixture)

pytestmark = pytest.mark.slow

RANK, ALPHA = 4, 8.0


def _lora_config(env, **overrides):
    return _config(env, lora_rank=RANK, lora_alpha=ALPHA, **overrides)


def _peft_reference(env, before: dict[str, torch.Tensor]):
    """A plain peft model of the same adapter (get_peft_model on a fresh transformers copy) holding `before`."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(env["model"], dtype=torch.float32)
    model = get_peft_model(base, LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules="all-linear", lora_dropout=0.0))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(before[name])
    return model


# Every loss aggregation mode (issue 30 asks for each): LoRA's gradient must match peft's in all of them.
@pytest.mark.parametrize("mode, kl_type", [("token-mean", "low_var_kl"), ("seq-mean-token-sum", "k1"), ("seq-mean-token-mean", "mse"), ("seq-mean-token-sum-norm", "abs")])
def test_lora_update_gradient_equals_a_plain_peft_model(env, mode, kl_type):
    config = _lora_config(env, loss_agg_mode=mode, kl_loss_type=kl_type)
    trainer = Trainer(config)
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all(lora.is_adapter(n) for n in trainable)
    held = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert held == {id(p) for n, p in trainer.model.named_parameters() if n in trainable}
    seen = []
    accumulate = trainer._accumulate_gradients

    def spy(batch_, rows, advantages, is_weights):
        before = {name: _full(p).detach().clone() for name, p in trainer.model.named_parameters()}
        metrics = accumulate(batch_, rows, advantages, is_weights)
        grads = {name: _full(p.grad).detach().clone() for name, p in trainer.model.named_parameters() if p.grad is not None}
        seen.append((list(rows), before, grads, metrics))
        return metrics

    trainer._accumulate_gradients = spy  # type: ignore[method-assign]
    trainer.update(str(env["root"] / "batch.safetensors"), str(env["root"] / "lp.safetensors"))
    assert len(seen) == 2
    for step, (rows, before, grads, metrics) in enumerate(seen):
        assert set(grads) == trainable  # no gradient on the frozen base
        reference = _peft_reference(env, before)
        loss, expected = _reference(reference.get_base_model(), env["batch"], rows, config)
        loss.backward()
        for name, p in reference.named_parameters():
            if not lora.is_adapter(name):
                assert p.grad is None, name
                continue
            error = (grads[name] - p.grad).norm() / p.grad.norm().clamp(min=1e-12)
            assert error < 1e-4, (mode, step, name, error.item())
        for name, value in expected.items():
            assert metrics[name] == pytest.approx(value, rel=1e-4, abs=1e-7), (mode, step, name)
    # the base never moved; the adapter did
    after = {name: _full(p).detach() for name, p in trainer.model.named_parameters()}
    first = seen[0][1]
    assert all(torch.equal(after[n], first[n]) for n in after if not lora.is_adapter(n))
    assert any(not torch.equal(after[n], first[n]) for n in trainable)


@pytest.fixture(scope="module")
def trained(env):
    """A LoRA trainer after one update (B no longer 0, so the adapter changes the model) with the KL reference on."""
    trainer = Trainer(_lora_config(env, ppo_mini_batch_size=None))
    trainer.update(str(env["root"] / "batch.safetensors"), str(env["root"] / "lp.safetensors"))
    return trainer


def test_the_reference_is_the_base_model_with_the_adapter_disabled(env, trained):
    assert trained.ref is None  # no second copy of the model
    out = env["root"] / "lora-lp.safetensors"
    trained.compute_log_probs(str(env["root"] / "batch.safetensors"), str(out))
    tensors = load_file(out)
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(env["model"], dtype=torch.float32)
    rows = list(range(env["batch"]["input_ids"].shape[0]))
    with torch.no_grad():
        plain, _ = _plain_forward(base, env["batch"], rows)
    width = plain.shape[1]
    assert torch.allclose(tensors["ref_log_probs"][:, :width], plain, atol=1e-5)
    assert not torch.allclose(tensors["old_log_probs"][:, :width], plain, atol=1e-4)


def test_merged_export_is_base_plus_scaled_b_a_and_the_adapter_folder_loads_in_peft(env, trained):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    trained.save_weights(str(env["root"] / "merged"), "float32")
    merged = load_file(env["root"] / "merged" / "model.safetensors")
    params = {name: _full(p).detach() for name, p in trained.model.named_parameters()}
    scale = ALPHA / RANK
    adapted = 0
    for item in lora.merged_names(list(params)):
        want = params[item.base]
        if item.lora_a is not None:
            want = want + params[item.lora_b] @ params[item.lora_a] * scale
            adapted += 1
        assert torch.allclose(merged[item.hf], want, atol=1e-6), item.hf
    base = AutoModelForCausalLM.from_pretrained(env["model"], dtype=torch.float32)
    assert adapted > 0 and set(merged) == set(base.state_dict()) - ({"lm_head.weight"} if base.config.tie_word_embeddings else set())

    reply = trained.save_adapter(str(env["root"] / "adapter"))
    assert reply["bytes"] > 0
    config = json.loads((env["root"] / "adapter" / "adapter_config.json").read_text())
    assert config["r"] == RANK and config["lora_alpha"] == ALPHA and isinstance(config["target_modules"], list)
    ids = env["batch"]["input_ids"][:2, :40]
    exported = AutoModelForCausalLM.from_pretrained(env["root"] / "merged", dtype=torch.float32)
    with_adapter = PeftModel.from_pretrained(base, env["root"] / "adapter")
    with torch.no_grad():
        want = trained.model(input_ids=ids).logits
        assert torch.allclose(exported(input_ids=ids).logits, want, atol=1e-5)
        assert torch.allclose(with_adapter(input_ids=ids).logits, want, atol=1e-5)


def test_merged_weight_sync_names_and_tensors_are_the_exported_models(env, trained):
    merged = load_file(env["root"] / "merged" / "model.safetensors") if (env["root"] / "merged").exists() else None
    sender = trained._weights
    names = [spec.name for spec in sender.specs("float32")]
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(env["model"], dtype=torch.float32)
    assert names == [n for n, _ in base.named_parameters()]
    state = lora.merged_state({n: _full(p).detach() for n, p in trained.model.named_parameters()}, ALPHA / RANK)
    for name, tensor in zip(names, sender._full_tensors(names, "float32")):
        assert torch.equal(tensor, state[name]), name
        if merged is not None and name in merged:
            assert torch.equal(tensor, merged[name]), name


def test_a_resumed_lora_run_continues_bit_for_bit(env, trained):
    # `trained` is a trainer of this config after one update; the tests above only read it, this one moves it on.
    config = _lora_config(env, ppo_mini_batch_size=None)
    batch, lp = str(env["root"] / "batch.safetensors"), str(env["root"] / "lp.safetensors")
    first = trained
    first.save_checkpoint(str(env["root"] / "ckpt"))
    state = torch.load(env["root"] / "ckpt" / "state.pt", weights_only=False)
    assert state["model"] and all(lora.is_adapter(k) for k in state["model"])  # the adapter only, not the base
    after = first.update(batch, lp)
    want = first.fingerprint()
    second = Trainer(config)
    second.load_checkpoint(str(env["root"] / "ckpt"))
    again = second.update(batch, lp)
    assert second.fingerprint() == want
    timed = lambda m: {k: v for k, v in m.items() if not k.startswith("timing_s/")}  # noqa: E731
    assert timed(again["metrics"]) == timed(after["metrics"])


def test_two_ranks_under_fsdp2_train_the_adapter_and_export_the_merged_model(env):
    """The worker as the CLI runs it with two ranks (torchrun, gloo, FSDP2 over the peft model): the update moves the
    adapter only, the merged export loads in transformers with the one-rank trainer's logits after the same update,
    and a checkpoint round trip is bit-identical."""
    from transformers import AutoModelForCausalLM

    from worker_harness import WorkerProcess

    root = env["root"]
    batch, lp = str(root / "batch.safetensors"), str(root / "lp.safetensors")
    config = {"model_path": str(env["model"]), "lr": 1e-2, "temperature": 0.9, "seed": 1, "use_ref": True,
              "use_kl_loss": True, "kl_loss_coef": 0.5, "lora_rank": RANK, "lora_alpha": ALPHA}
    worker = WorkerProcess(2, root)
    try:
        assert worker.ok("init", config=config)["fsdp"] == "fsdp2"
        worker.ok("update", batch=batch, log_probs=lp)
        worker.ok("save_weights", dir=str(root / "merged2"), dtype="float32")
        worker.ok("save_checkpoint", dir=str(root / "ckpt2"))
        saved = worker.ok("fingerprint")
        moved = worker.ok("update", batch=batch, log_probs=lp)
        worker.ok("load_checkpoint", dir=str(root / "ckpt2"))
        restored = worker.ok("fingerprint")
        assert (restored["params"], restored["optimizer"], restored["step"]) == (saved["params"], saved["optimizer"], saved["step"])
        again = worker.ok("update", batch=batch, log_probs=lp)
        assert again["metrics"]["actor/pg_loss"] == moved["metrics"]["actor/pg_loss"]
    finally:
        worker.close()
    one = Trainer(WorkerConfigFrom(config))
    one.update(batch, lp)
    ids = env["batch"]["input_ids"][:2, :40]
    exported = AutoModelForCausalLM.from_pretrained(root / "merged2", dtype=torch.float32)
    with torch.no_grad():
        assert torch.allclose(exported(input_ids=ids).logits, one.model(input_ids=ids).logits, atol=1e-4)


def WorkerConfigFrom(raw):  # noqa: N802
    from agentrl_worker.config import WorkerConfig

    return WorkerConfig.from_dict(raw)
