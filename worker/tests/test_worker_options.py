"""A 1-rank worker with the less common options on: mini-batches of one prompt, two epochs, RLOO, seq-mean-token-mean,
an entropy bonus, truncated importance sampling against rollout log-probs, and gradient checkpointing.

The tests share one worker process and run in file order: first the refusals of a worker not yet initialised (a bad
init leaves it uninitialised), then the init with those options, an update, the refused second init and the shutdown."""

import math

import pytest
import torch
from safetensors.torch import save_file

from agentrl_worker.make_tiny import make_tiny

from worker_harness import TOKENIZER_DIR, WorkerProcess, build_batch

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("worker-options")
    worker = WorkerProcess(1, root)
    try:
        yield {"root": root, "worker": worker}
    finally:
        worker.close()


def test_init_refuses_bad_settings_with_the_field_named(env):
    worker, root = env["worker"], env["root"]
    # Started without torchrun, as the CLI starts one rank: a world of one.
    assert worker.ready["event"] == "ready" and worker.ready["world_size"] == 1
    reply = worker.call("init", config={"model_path": str(root), "clip_ratio": 0.2})
    assert reply["ok"] is False and reply["error"]["type"] == "InputError" and "clip_ratio" in reply["error"]["message"]
    reply = worker.call("init", config={"model_path": str(root)})
    assert reply["ok"] is False and "config.json" in reply["error"]["message"]
    reply = worker.call("update", batch="x")
    assert reply["ok"] is False and "send init first" in reply["error"]["message"]


def test_mini_batches_epochs_and_rollout_correction(env):
    worker, tmp_path = env["worker"], env["root"]
    model = make_tiny(TOKENIZER_DIR, layers=1, hidden=32, out=tmp_path / "tiny", seed=2)
    batch = build_batch(tmp_path / "plain.safetensors", prompts=2, samples=2)
    # The engine's behaviour log-probs: close to uniform over the vocabulary (~ -11.93), as for a random model.
    batch["rollout_log_probs"] = torch.where(batch["response_mask"] == 1, -12.0, 0.0).float()
    save_file(batch, str(tmp_path / "batch.safetensors"))
    # The worker may have refused inits before (the test above): they left it uninitialised, so this one is its first.
    worker.ok("init", config={
        "model_path": str(model), "lr": 1e-3, "ppo_mini_batch_size": 1, "ppo_epochs": 2, "adv_estimator": "rloo",
        "loss_agg_mode": "seq-mean-token-mean", "entropy_coeff": 0.01, "rollout_is_threshold": 2.0,
        "gradient_checkpointing": True, "micro_batch_token_budget": 128,
    })
    computed = worker.ok("compute_log_probs", batch=str(tmp_path / "batch.safetensors"), out=str(tmp_path / "lp.safetensors"))
    # mismatch/kl = mean(rollout - old) over response tokens: a random model is near uniform, so small but not 0
    assert computed["metrics"]["mismatch/kl"] != 0 and abs(computed["metrics"]["mismatch/kl"]) < 1.0
    reply = worker.ok("update", batch=str(tmp_path / "batch.safetensors"), log_probs=str(tmp_path / "lp.safetensors"))
    metrics = reply["metrics"]
    # 2 prompts / 1 per mini-batch x 2 epochs
    assert reply["step"] == 4 and metrics["actor/optimizer_steps"] == 4
    assert metrics["actor/ratio_max"] > 1.0 or metrics["actor/ratio_min"] < 1.0  # later steps are off-policy
    assert metrics["actor/entropy"] > 0 and math.isfinite(metrics["actor/pg_loss"])
    assert "mismatch/ratio_mean" in metrics
    bad = worker.call("init", config={"model_path": str(model)})
    assert bad["ok"] is False and "already initialised" in bad["error"]["message"]
    worker.ok("shutdown")
    assert worker.proc.wait(timeout=60) == 0
