"""The `init` command's settings, with verl's key names and defaults. Unknown keys and wrong types are refused."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .algos import KL_KINDS, LOSS_AGG_MODES
from .lr_schedule import SCHEDULER_TYPES


class ConfigError(ValueError):
    """A bad field in a command; the reply names the field."""


@dataclass
class WorkerConfig:
    model_path: str
    """Hugging Face model folder (config.json + safetensors) the policy, and the reference, start from."""
    dtype: str = "float32"
    """Parameter dtype of the sharded master weights: float32 or bfloat16. On CUDA, compute runs in bf16 either way."""
    seed: int = 0
    lr: float = 1e-6
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    weight_decay: float = 0.01
    lr_warmup_steps: int = -1
    """Linear warm-up from 0 over this many optimizer steps; negative (verl's default): lr_warmup_steps_ratio decides."""
    lr_warmup_steps_ratio: float = 0.0
    """Warm-up as a fraction of total_optimizer_steps, when lr_warmup_steps is negative."""
    lr_scheduler_type: str = "constant"
    """After the warm-up: constant, or cosine down to min_lr_ratio × lr at total_optimizer_steps (lr_schedule.py)."""
    min_lr_ratio: float = 0.0
    num_cycles: float = 0.5
    """Cosine waves over the decay; 0.5 is one half-wave from lr down to min_lr_ratio × lr."""
    total_optimizer_steps: int | None = None
    """Optimizer steps of the whole run (the CLI's estimate), needed by cosine and by lr_warmup_steps_ratio."""
    grad_clip: float = 1.0
    reshard_after_forward: bool = True
    use_ref: bool = False
    """Keep a frozen, sharded reference copy of the initial model (needed by use_kl_loss)."""
    ref_offload: bool = False
    """Keep the reference's shards in CPU memory (FSDP2 CPUOffloadPolicy), copied to the GPU layer by layer."""
    gradient_checkpointing: bool = False
    micro_batch_token_budget: int = 8192
    """Padded tokens per micro-batch per rank (verl: ppo_max_token_len_per_gpu with use_dynamic_bsz)."""
    temperature: float = 1.0
    """The rollout temperature: logits are divided by it before log_softmax."""
    ppo_mini_batch_size: int | None = None
    """Prompts (groups) per optimizer step; None means the whole batch is one mini-batch."""
    ppo_epochs: int = 1
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    clip_ratio_c: float = 3.0
    loss_agg_mode: str = "token-mean"
    loss_scale_factor: float | None = None
    """The constant L of seq-mean-token-sum-norm (each sequence's token sum / L, averaged over sequences); None means
    max_response_length."""
    max_response_length: int | None = None
    """data.max_response_length: the response token budget, L of seq-mean-token-sum-norm when loss_scale_factor is None."""
    use_kl_loss: bool = False
    kl_loss_coef: float = 0.001
    kl_loss_type: str = "low_var_kl"
    entropy_coeff: float = 0.0
    adv_estimator: str = "grpo"
    """grpo or rloo."""
    norm_adv_by_std_in_grpo: bool = True
    rollout_is_threshold: float | None = None
    """Truncated importance sampling against the rollout's log-probs: weight = min(pi_old / pi_rollout, threshold)."""

    @staticmethod
    def from_dict(raw: dict[str, Any]) -> "WorkerConfig":
        known = {f.name: f for f in dataclasses.fields(WorkerConfig)}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            raise ConfigError(f"init: unknown field(s) {', '.join(unknown)}")
        if "model_path" not in raw:
            raise ConfigError("init: model_path is required")
        for name, value in raw.items():
            _check_type(name, value, known[name].type)
        config = WorkerConfig(**raw)
        _check_choice("loss_agg_mode", config.loss_agg_mode, LOSS_AGG_MODES)
        _check_choice("kl_loss_type", config.kl_loss_type, KL_KINDS)
        _check_choice("adv_estimator", config.adv_estimator, ("grpo", "rloo"))
        _check_choice("dtype", config.dtype, ("float32", "bfloat16"))
        if config.temperature <= 0:
            raise ConfigError("init: temperature must be > 0")
        if config.micro_batch_token_budget < 1 or config.ppo_epochs < 1:
            raise ConfigError("init: micro_batch_token_budget and ppo_epochs must be >= 1")
        if config.use_kl_loss and not config.use_ref:
            raise ConfigError("init: use_kl_loss needs use_ref: true")
        _check_schedule(config)
        for name in ("loss_scale_factor", "max_response_length"):
            if getattr(config, name) is not None and getattr(config, name) <= 0:
                raise ConfigError(f"init: {name} must be > 0")
        if config.loss_agg_mode == "seq-mean-token-sum-norm" and config.sum_norm_length() is None:
            raise ConfigError("init: loss_agg_mode seq-mean-token-sum-norm needs max_response_length (or loss_scale_factor)")
        return config

    def sum_norm_length(self) -> float | None:
        """L of seq-mean-token-sum-norm: loss_scale_factor, else max_response_length (None when neither is set)."""
        if self.loss_scale_factor is not None:
            return float(self.loss_scale_factor)
        return None if self.max_response_length is None else float(self.max_response_length)


def _check_schedule(config: WorkerConfig) -> None:
    """The learning-rate schedule's fields: what would otherwise fail (or silently do nothing) at the first step."""
    _check_choice("lr_scheduler_type", config.lr_scheduler_type, SCHEDULER_TYPES)
    if not 0.0 <= config.min_lr_ratio <= 1.0:
        raise ConfigError(f"init: min_lr_ratio must be in [0, 1], got {config.min_lr_ratio}")
    if not 0.0 <= config.lr_warmup_steps_ratio <= 1.0:
        raise ConfigError(f"init: lr_warmup_steps_ratio must be in [0, 1], got {config.lr_warmup_steps_ratio}")
    if config.total_optimizer_steps is not None and config.total_optimizer_steps < 1:
        raise ConfigError("init: total_optimizer_steps must be >= 1")
    if config.total_optimizer_steps is None:
        if config.lr_scheduler_type == "cosine":
            raise ConfigError("init: lr_scheduler_type cosine needs total_optimizer_steps")
        if config.lr_warmup_steps < 0 and config.lr_warmup_steps_ratio > 0:
            raise ConfigError("init: lr_warmup_steps_ratio needs total_optimizer_steps")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"init: {name} must be one of {', '.join(choices)}, got {value!r}")


def _check_type(name: str, value: Any, annotation: str) -> None:
    optional = "None" in annotation
    if value is None:
        if not optional:
            raise ConfigError(f"init: {name} must not be null")
        return
    base = annotation.split("|")[0].strip()
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "list[float]": isinstance(value, list) and all(isinstance(v, (int, float)) for v in value),
    }.get(base, True)
    if not ok:
        raise ConfigError(f"init: {name} must be {base}, got {type(value).__name__}")
