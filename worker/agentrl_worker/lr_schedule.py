"""The learning-rate schedule of verl's FSDP workers (verl/utils/torch_functional.py get_constant_schedule_with_warmup
and get_cosine_schedule_with_warmup, chosen in fsdp_workers.py by optim.lr_scheduler_type): a linear warm-up from 0,
then a constant rate or a cosine decay to min_lr_ratio × lr. It knows nothing of PPO, so GRPO updates and SFT steps
share it; the caller steps it once per optimizer step."""

from __future__ import annotations

import math

import torch

SCHEDULER_TYPES = ("constant", "cosine")


def resolve_warmup_steps(lr_warmup_steps: int, lr_warmup_steps_ratio: float, total_steps: int | None) -> int:
    """verl's rule: lr_warmup_steps >= 0 is the warm-up length; a negative one (verl's default, -1) means
    int(lr_warmup_steps_ratio × total steps)."""
    if lr_warmup_steps >= 0:
        return lr_warmup_steps
    if lr_warmup_steps_ratio == 0:
        return 0
    if total_steps is None:
        raise ValueError("lr_warmup_steps_ratio needs the total number of optimizer steps")
    return int(lr_warmup_steps_ratio * total_steps)


def lr_factor(
    step: int,
    *,
    warmup_steps: int,
    total_steps: int | None,
    scheduler_type: str = "constant",
    min_lr_ratio: float = 0.0,
    num_cycles: float = 0.5,
) -> float:
    """The multiplier of the base learning rate at optimizer step `step` (0-based), as verl computes it:
    - warm-up: step / warmup_steps, so the first step runs at 0 and step `warmup_steps` at the full rate;
    - constant: 1 afterwards;
    - cosine: min_lr_ratio + (1 - min_lr_ratio) × (1 + cos(2π × num_cycles × progress)) / 2, never below min_lr_ratio,
      with progress running from 0 after the warm-up to 1 at total_steps (num_cycles 0.5: one half-wave down)."""
    if step < warmup_steps:
        return step / max(1, warmup_steps)
    if scheduler_type == "constant":
        return 1.0
    if scheduler_type != "cosine":
        raise ValueError(f"lr_scheduler_type must be one of {', '.join(SCHEDULER_TYPES)}, got {scheduler_type!r}")
    if total_steps is None:
        raise ValueError("a cosine schedule needs the total number of optimizer steps")
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    wave = math.cos(math.pi * num_cycles * 2.0 * progress)
    return max(min_lr_ratio, wave * (1 - min_lr_ratio) * 0.5 + (1 + min_lr_ratio) * 0.5)


def make_scheduler(
    optimizer: torch.optim.Optimizer,
    *,
    lr_warmup_steps: int,
    lr_warmup_steps_ratio: float,
    total_steps: int | None,
    scheduler_type: str,
    min_lr_ratio: float,
    num_cycles: float,
) -> torch.optim.lr_scheduler.LambdaLR:
    """A LambdaLR over lr_factor. Its state_dict holds the step count, so a checkpoint resumes the schedule."""
    warmup = resolve_warmup_steps(lr_warmup_steps, lr_warmup_steps_ratio, total_steps)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: lr_factor(
            step, warmup_steps=warmup, total_steps=total_steps, scheduler_type=scheduler_type,
            min_lr_ratio=min_lr_ratio, num_cycles=num_cycles,
        ),
    )
