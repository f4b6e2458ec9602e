"""The learning-rate schedule (agentrl_worker.lr_schedule) against values worked out from verl's formulas
(verl/utils/torch_functional.py): warm-up step / warmup from 0, then constant, or
min + (1 - min) * (1 + cos(2 pi num_cycles progress)) / 2."""

import math

import pytest
import torch

from agentrl_worker.config import ConfigError, WorkerConfig
from agentrl_worker.lr_schedule import lr_factor, make_scheduler, resolve_warmup_steps


def factors(steps, **kwargs):
    return [lr_factor(step, **kwargs) for step in steps]


def test_warmup_is_linear_from_zero_then_constant():
    # warmup 4: 0/4, 1/4, 2/4, 3/4, then the full rate from step 4 on.
    assert factors(range(7), warmup_steps=4, total_steps=None) == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    # No warm-up, constant: the full rate from the first step (the default schedule).
    assert factors(range(3), warmup_steps=0, total_steps=None) == [1.0, 1.0, 1.0]


def test_cosine_decays_from_lr_to_min_lr_ratio_at_the_last_step():
    kwargs = dict(warmup_steps=2, total_steps=10, scheduler_type="cosine", min_lr_ratio=0.1)
    # Warm-up 0, 1/2; then progress (step - 2) / 8: 0 at step 2 (factor 1), 1/2 at step 6 (cos = 0: (1 + 0.1) / 2),
    # 1 at step 10 (cos = -1: min_lr_ratio).
    assert lr_factor(0, **kwargs) == 0.0
    assert lr_factor(1, **kwargs) == 0.5
    assert lr_factor(2, **kwargs) == pytest.approx(1.0)
    assert lr_factor(6, **kwargs) == pytest.approx(0.55)
    assert lr_factor(10, **kwargs) == pytest.approx(0.1)
    # Step 4, progress 1/4: 0.55 + 0.45 cos(pi / 4).
    assert lr_factor(4, **kwargs) == pytest.approx(0.55 + 0.45 * math.cos(math.pi / 4))
    decay = factors(range(2, 11), **kwargs)
    assert all(a > b for a, b in zip(decay, decay[1:]))  # strictly down after the warm-up
    # min_lr_ratio 0 (verl's default): down to 0.
    assert lr_factor(10, warmup_steps=0, total_steps=10, scheduler_type="cosine") == pytest.approx(0.0)


def test_cosine_num_cycles_one_is_a_full_wave():
    kwargs = dict(warmup_steps=0, total_steps=8, scheduler_type="cosine", min_lr_ratio=0.0, num_cycles=1.0)
    assert factors([0, 2, 4, 6, 8], **kwargs) == pytest.approx([1.0, 0.5, 0.0, 0.5, 1.0])


def test_warmup_steps_follow_verl_negative_means_ratio():
    assert resolve_warmup_steps(3, 0.5, 100) == 3  # >= 0: the count, the ratio ignored
    assert resolve_warmup_steps(0, 0.5, 100) == 0
    assert resolve_warmup_steps(-1, 0.1, 95) == 9  # int(0.1 * 95)
    assert resolve_warmup_steps(-1, 0.0, None) == 0  # verl's defaults: no warm-up
    with pytest.raises(ValueError, match="total number of optimizer steps"):
        resolve_warmup_steps(-1, 0.1, None)


def test_scheduler_drives_the_optimizer_and_resumes_from_its_state():
    def fresh():
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.2)
        scheduler = make_scheduler(
            optimizer, lr_warmup_steps=-1, lr_warmup_steps_ratio=0.25, total_steps=8, scheduler_type="cosine",
            min_lr_ratio=0.5, num_cycles=0.5,
        )
        return optimizer, scheduler

    optimizer, scheduler = fresh()
    seen = []
    for _ in range(9):
        seen.append(scheduler.get_last_lr()[0])  # the rate this optimizer step uses (the worker's actor/lr)
        optimizer.step()
        scheduler.step()
    # warm-up int(0.25 * 8) = 2 steps; cosine from 0.2 down to 0.5 * 0.2 over steps 2..8.
    expected = [0.2 * lr_factor(s, warmup_steps=2, total_steps=8, scheduler_type="cosine", min_lr_ratio=0.5) for s in range(9)]
    assert seen == pytest.approx(expected)
    assert seen[0] == 0.0 and seen[2] == pytest.approx(0.2) and seen[8] == pytest.approx(0.1)

    # A checkpoint taken after 5 steps resumes at step 5's rate.
    optimizer, scheduler = fresh()
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    state = scheduler.state_dict()
    resumed_optimizer, resumed = fresh()
    resumed.load_state_dict(state)
    resumed_optimizer.step()
    assert resumed.get_last_lr()[0] == pytest.approx(expected[5])
    resumed.step()
    assert resumed.get_last_lr()[0] == pytest.approx(expected[6])


def test_worker_config_checks_the_schedule_fields():
    base = {"model_path": "m"}
    config = WorkerConfig.from_dict({**base, "lr_scheduler_type": "cosine", "total_optimizer_steps": 10, "min_lr_ratio": 0.1})
    assert (config.lr_scheduler_type, config.total_optimizer_steps, config.lr_warmup_steps) == ("cosine", 10, -1)
    with pytest.raises(ConfigError, match="lr_scheduler_type cosine needs total_optimizer_steps"):
        WorkerConfig.from_dict({**base, "lr_scheduler_type": "cosine"})
    with pytest.raises(ConfigError, match="lr_warmup_steps_ratio needs total_optimizer_steps"):
        WorkerConfig.from_dict({**base, "lr_warmup_steps_ratio": 0.1})
    with pytest.raises(ConfigError, match="lr_scheduler_type must be one of constant, cosine, got 'linear'"):
        WorkerConfig.from_dict({**base, "lr_scheduler_type": "linear"})
    with pytest.raises(ConfigError, match=r"min_lr_ratio must be in \[0, 1\]"):
        WorkerConfig.from_dict({**base, "min_lr_ratio": 1.5})
    with pytest.raises(ConfigError, match="total_optimizer_steps must be int"):
        WorkerConfig.from_dict({**base, "total_optimizer_steps": 2.5})
