"""The trainer's real update, cut into micro-batches and mini-batches, against one plain forward per mini-batch.

One in-process rank (gloo, world size 1, FSDP2 on the CPU) runs `Trainer.update` on a tiny model with a small token
budget (several micro-batches per mini-batch) and one prompt fewer per mini-batch than the batch holds (two optimizer
steps). A spy around `_accumulate_gradients` keeps the weights before and the gradient after each mini-batch; the test
then loads those weights into a plain transformers copy, computes the loss of the whole mini-batch in one go (the
algos functions on unchunked tensors) and compares autograd's gradient with the trainer's, for every aggregation mode
with the KL loss and the entropy bonus on.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from agentrl_worker import algos
from agentrl_worker.batch import mini_batches
from agentrl_worker.config import WorkerConfig
from agentrl_worker.make_tiny import make_tiny
from agentrl_worker.trainer import Trainer

from worker_harness import TOKENIZER_DIR, build_batch, cpu_rank

pytestmark = pytest.mark.slow

TEMPERATURE = 0.9
MAX_RESPONSE_LENGTH = 200
IS_THRESHOLD = 1.5


def _full(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor


def _plain_forward(model, batch, rows):
    """Log-probs and entropies [b, T] of the rows' response tokens (0 elsewhere), from one forward of the whole rows;
    the lm_head runs on the hidden states that predict a response token only (a 151k vocabulary is costly on a CPU)."""
    input_ids, attention = batch["input_ids"][rows], batch["attention_mask"][rows]
    mask = batch["response_mask"][rows].bool()
    hidden = model.model(input_ids=input_ids, attention_mask=attention).last_hidden_state
    target = torch.zeros_like(mask)
    target[:, :-1] = mask[:, 1:]  # position t predicts token t + 1
    picked, entropy = algos.log_probs_and_entropy(model.lm_head(hidden[target]), input_ids[mask], TEMPERATURE)
    log_probs = torch.zeros(mask.shape).masked_scatter(mask, picked)
    return log_probs, torch.zeros(mask.shape).masked_scatter(mask, entropy)


def build_files(root: Path) -> dict:
    """The tiny model, the batch and its log-probs in `root`; conftest.py's `update_gradient_files` calls this once per
    session for every module that uses `env` (this one, test_lora.py, test_ref_model.py), which only read them."""
    from transformers import AutoModelForCausalLM

    model_dir = make_tiny(TOKENIZER_DIR, layers=1, hidden=32, out=root / "tiny", seed=5)
    batch = build_batch(root / "plain.safetensors", prompts=3, samples=3)  # 3 groups x 3 samples, two turns each
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.no_grad():
        log_probs, _ = _plain_forward(model, batch, list(range(batch["input_ids"].shape[0])))
    # Off-policy old, reference and rollout log-probs, so the clip, the dual clip, the KL and the importance weights
    # all act from the first mini-batch on.
    gen = torch.Generator().manual_seed(7)
    mask = batch["response_mask"].bool()
    noisy = lambda scale: torch.where(mask, log_probs + scale * torch.randn(log_probs.shape, generator=gen), 0.0)  # noqa: E731
    old, ref = noisy(0.6), noisy(0.3)
    batch["rollout_log_probs"] = torch.where(mask, old + 0.3 * torch.randn(old.shape, generator=gen), 0.0)
    save_file(batch, str(root / "batch.safetensors"))
    save_file({"old_log_probs": old, "ref_log_probs": ref}, str(root / "lp.safetensors"))
    return {"root": root, "model": model_dir, "batch": {**batch, "old_log_probs": old, "ref_log_probs": ref}}


@pytest.fixture(scope="module")
def env(update_gradient_files, tmp_path_factory):
    """The session's model and batch (build_files), with a folder of the module's own holding copies of the batch and
    log-probs (the tests write their outputs next to them), on one in-process rank."""
    root = tmp_path_factory.mktemp("update-gradient")
    for name in ("batch.safetensors", "lp.safetensors"):
        shutil.copyfile(update_gradient_files["root"] / name, root / name)
    with cpu_rank(root):
        yield {"root": root, "model": update_gradient_files["model"], "batch": dict(update_gradient_files["batch"])}


def _config(env, **overrides) -> WorkerConfig:
    lengths = env["batch"]["attention_mask"].sum(-1)
    return WorkerConfig.from_dict({
        "model_path": str(env["model"]), "lr": 1e-2, "temperature": TEMPERATURE, "seed": 1,
        "use_ref": True, "use_kl_loss": True, "kl_loss_coef": 0.5, "entropy_coeff": 0.05,
        "ppo_mini_batch_size": 2, "micro_batch_token_budget": int(2 * lengths.max()),  # about 2 rows per micro-batch
        "clip_ratio_c": 2.0, "rollout_is_threshold": IS_THRESHOLD, "max_response_length": MAX_RESPONSE_LENGTH,
        **overrides,
    })


def _reference(model, batch, rows, config: WorkerConfig):
    """The mini-batch's loss in one go: the formula of `_accumulate_gradients`, on unchunked tensors."""
    log_probs, entropy = _plain_forward(model, batch, rows)
    mask = batch["response_mask"][rows].float()
    advantages = algos.grpo_advantages(batch["rewards"], batch["group_ids"])[rows]
    ratio = torch.exp(torch.clamp(batch["old_log_probs"] - batch["rollout_log_probs"], -20.0, 20.0))
    weights = (torch.clamp(ratio, max=IS_THRESHOLD) * batch["response_mask"].float())[rows]
    mode, length = config.loss_agg_mode, float(MAX_RESPONSE_LENGTH)
    pg_mode = "seq-mean-token-mean" if config.loss_mode == "gspo" else mode
    pg, metrics = algos.policy_loss(
        log_probs, batch["old_log_probs"][rows], advantages, mask, config.clip_ratio_low, config.clip_ratio_high,
        config.clip_ratio_c, pg_mode, rollout_is_weights=weights, loss_scale_factor=length, loss_mode=config.loss_mode,
    )
    ent = algos.agg_loss(entropy, mask, mode, loss_scale_factor=length)
    kl = algos.agg_loss(algos.kl_penalty(log_probs, batch["ref_log_probs"][rows], config.kl_loss_type), mask, mode, loss_scale_factor=length)
    loss = pg - config.entropy_coeff * ent + config.kl_loss_coef * kl
    values = {"actor/pg_loss": pg, "actor/entropy": ent, "actor/kl_loss": kl,
              **{f"actor/{name}": value for name, value in metrics.items()}}
    return loss, {name: value.item() for name, value in values.items()}


#: GSPO's own clip range (its paper's 3e-4 and 4e-4): sequence ratios sit near 1, so 0.2 would never clip them.
GSPO = {"loss_mode": "gspo", "clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4}


@pytest.mark.parametrize(
    "mode, kl_type, shuffle, loss",
    [("token-mean", "low_var_kl", False, {}), ("seq-mean-token-sum", "k1", False, {}), ("seq-mean-token-mean", "mse", True, {}),
     ("seq-mean-token-sum-norm", "abs", False, {}), ("token-mean", "low_var_kl", False, GSPO)],
    ids=["token-mean", "seq-mean-token-sum", "seq-mean-token-mean-shuffled", "seq-mean-token-sum-norm", "gspo"],
)
def test_update_gradient_equals_autograd_of_the_whole_mini_batch(env, mode, kl_type, shuffle, loss):
    from transformers import AutoModelForCausalLM

    # Shuffled, seed 2 draws mini-batches that each clip on both sides, as whole groups do with seed 1.
    config = _config(env, loss_agg_mode=mode, kl_loss_type=kl_type, shuffle=shuffle, seed=2 if shuffle else 1, **loss)
    trainer = Trainer(config)
    batch = env["batch"]
    seen = []
    accumulate = trainer._accumulate_gradients

    def spy(batch_, rows, advantages, is_weights):
        before = {name: _full(p).detach().clone() for name, p in trainer.model.named_parameters()}
        metrics = accumulate(batch_, rows, advantages, is_weights)
        grads = {name: _full(p.grad).detach().clone() for name, p in trainer.model.named_parameters()}
        seen.append((list(rows), before, grads, metrics))
        return metrics

    trainer._accumulate_gradients = spy  # type: ignore[method-assign]
    reply = trainer.update(str(env["root"] / "batch.safetensors"), str(env["root"] / "lp.safetensors"))

    # 3 prompts, 2 per mini-batch: two optimizer steps, each over several micro-batches; whole prompts unless shuffled.
    drawn = torch.Generator().manual_seed(config.seed * 1_000_003) if shuffle else None
    expected = mini_batches(batch["group_ids"], 2, drawn)
    assert reply["step"] == 2 and [rows for rows, *_ in seen] == expected
    assert (expected != mini_batches(batch["group_ids"], 2)) == shuffle
    assert [len(trainer._plan(batch, rows).per_rank[0]) for rows in mini_batches(batch["group_ids"], 2)] == [3, 2]
    assert min(len(trainer._plan(batch, rows).per_rank[0]) for rows, *_ in seen) >= 2
    reference = AutoModelForCausalLM.from_pretrained(env["model"], dtype=torch.float32)
    for step, (rows, before, grads, metrics) in enumerate(seen):
        with torch.no_grad():
            for name, p in reference.named_parameters():
                p.copy_(before[name])
        reference.zero_grad(set_to_none=True)
        loss, expected = _reference(reference, batch, rows, config)
        loss.backward()
        for name, p in reference.named_parameters():
            assert p.grad is not None, name
            error = (grads[name] - p.grad).norm() / p.grad.norm().clamp(min=1e-12)
            assert error < 1e-4, (mode, step, name, error.item(), p.grad.norm().item())
        total = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in reference.parameters()))
        assert total > 1e-6
        for name, value in expected.items():
            assert metrics[name] == pytest.approx(value, rel=1e-4, abs=1e-7), (mode, step, name)
        # the loss terms and the clipping all take part in the gradient compared above
        assert metrics["actor/kl_loss"] != 0 and metrics["actor/entropy"] > 0
        assert metrics["actor/pg_clipfrac"] > 0
        # GSPO has no dual clip; PPO's is hit in every mini-batch here.
        assert (metrics["actor/pg_clipfrac_lower"] > 0) == (config.loss_mode == "vanilla")
    # the first step moved the weights, so the second mini-batch saw other ones
    assert any(not torch.equal(seen[0][1][name], seen[1][1][name]) for name in seen[0][1])


def test_compute_log_probs_reports_entropy_per_turn_class(env):
    trainer = Trainer(_config(env))
    out = env["root"] / "computed.safetensors"
    metrics = trainer.compute_log_probs(str(env["root"] / "batch.safetensors"), str(out))["metrics"]
    from safetensors.torch import load_file

    entropy = load_file(out)["entropy"]
    classes = algos.response_turn_classes(env["batch"]["response_mask"])
    # build_batch's rows are a tool call, a tool response and an answer: every class has tokens
    assert set(classes) == {"turn_start", "final_turn", "tool_turns"}
    for name, positions in classes.items():
        assert positions.any()
        assert metrics[f"actor/entropy/{name}"] == pytest.approx(algos.masked_mean(entropy, positions).item(), rel=1e-6)
    assert metrics["actor/entropy"] == pytest.approx(algos.masked_mean(entropy, env["batch"]["response_mask"]).item(), rel=1e-6)
    assert metrics["actor/entropy/turn_start"] != metrics["actor/entropy/final_turn"]


def test_a_step_with_a_gradient_that_is_not_finite_is_skipped_and_its_reply_is_valid_json(env):
    """A NaN in the gradients skips the optimizer step (the weights stay), and the reply carries no NaN: JSON has none,
    and the CLI refused the whole reply when the worker wrote one."""
    import json

    trainer = Trainer(_config(env, ppo_mini_batch_size=None))
    accumulate = trainer._accumulate_gradients

    def poison(batch_, rows, advantages, is_weights):
        metrics = accumulate(batch_, rows, advantages, is_weights)
        next(p for p in trainer.model.parameters() if p.grad is not None).grad.fill_(float("nan"))
        return metrics

    trainer._accumulate_gradients = poison  # type: ignore[method-assign]
    before = {name: _full(p).detach().clone() for name, p in trainer.model.named_parameters()}
    reply = trainer.update(str(env["root"] / "batch.safetensors"), str(env["root"] / "lp.safetensors"))
    json.dumps(reply, allow_nan=False)
    assert reply["metrics"]["actor/skipped_step"] == 1.0 and "actor/grad_norm" not in reply["metrics"]
    assert all(torch.equal(_full(p).detach(), before[name]) for name, p in trainer.model.named_parameters())
