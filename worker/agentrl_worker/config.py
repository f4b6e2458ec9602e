"""The `init` command's settings, with verl's key names and defaults. Their types and ranges are the protocol's
(protocol.schema.json); unknown keys, wrong types and values out of range are refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .protocol import ConfigError, check_init_config

__all__ = ["ConfigError", "WorkerConfig"]


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
    ref_model_path: str | None = None
    """The reference's own Hugging Face folder (same architecture and tokenizer). Default: the initial model, which
    with LoRA is the policy with its adapter disabled (no second copy); set, a frozen copy of this folder is kept."""
    gradient_checkpointing: bool = False
    micro_batch_token_budget: int = 8192
    """Tokens per micro-batch per rank (verl: ppo_max_token_len_per_gpu with use_dynamic_bsz): without padding when
    use_remove_padding, else rows x the longest row."""
    use_remove_padding: bool = True
    """Pack each micro-batch's rows into one sequence without padding (verl: actor_rollout_ref.model.use_remove_padding)
    where a varlen attention kernel runs it (flash-attn on a GPU); elsewhere the worker pads, unless packed_sdpa. Needs
    transformers' packed-sequence masks (4.53+), else the worker pads and says so in its log."""
    share_prefix: bool = True
    """Run the tokens all rows of a padded micro-batch share (a GRPO group's prompt, a common system prompt) once, and
    the rest of each row on a copy of their key/value cache: the same log-probs and gradients for fewer tokens. Under
    gradients only where the model is not FSDP-wrapped (one rank, no mixed precision, no offload)."""
    packed_sdpa: bool = False
    """Pack without flash-attn too, through sdpa's block-diagonal mask: exact, but its attention costs the square of the
    whole packed length instead of the sum of the rows' squares (30x slower on the CPU demo's micro-batches), so it is
    for checking packing on the CPU (worker/tests/test_packing.py), not for speed."""
    logprob_chunk_tokens: int = 1024
    """Tokens per chunk of the lm_head and log-softmax (algos.head_log_probs): bounds the [tokens x vocab] float32 memory."""
    param_offload: bool = False
    """Keep the policy's parameter and gradient shards in CPU memory (FSDP2 CPUOffloadPolicy), copied to the GPU layer by
    layer; the optimizer then steps on the CPU, so its state lives there too (verl: fsdp_config.param_offload)."""
    optimizer_offload: bool = False
    """Keep the optimizer state in CPU memory between optimizer steps (verl: fsdp_config.optimizer_offload)."""
    temperature: float = 1.0
    """The rollout temperature: logits are divided by it before log_softmax."""
    ppo_mini_batch_size: int | None = None
    """Prompts (groups) per optimizer step; None means the whole batch is one mini-batch."""
    ppo_epochs: int = 1
    shuffle: bool = False
    """Mini-batches of rows drawn at random across the batch's groups instead of whole groups (verl: actor.shuffle)."""
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.2
    clip_ratio_c: float = 3.0
    loss_mode: str = "vanilla"
    """The policy loss: vanilla (PPO's clipped surrogate with dual clip) or gspo (sequence-level ratios, algos.gspo_surrogate)."""
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
    """Importance sampling against the rollout's log-probs, weight pi_old / pi_rollout, with rollout_is_mode above it."""
    rollout_is_mode: str = "truncate"
    """truncate: min(weight, threshold) (verl's TIS); mask: 0 above the threshold (AReaL's decoupled PPO)."""
    lora_rank: int = 0
    """0: every weight trains. > 0: a peft LoRA adapter of this rank trains and the base stays frozen; the optimizer
    holds the adapter only, and the reference is the policy with its adapter disabled (lora.py)."""
    lora_alpha: float = 16.0
    """LoRA scaling: the adapter's update is B·A·(lora_alpha / lora_rank)."""
    target_modules: Any = "all-linear"
    """all-linear (every linear layer but the lm_head) or a list of module names (q_proj, v_proj, ...)."""
    exclude_modules: Any = None
    """Module names (or a regex) left without an adapter."""

    @staticmethod
    def from_dict(raw: dict[str, Any]) -> "WorkerConfig":
        # Types, choices, ranges and unknown keys: protocol.schema.json. What is left are rules tying fields together.
        check_init_config(raw)
        config = WorkerConfig(**raw)
        if config.use_kl_loss and not config.use_ref:
            raise ConfigError("init: use_kl_loss needs use_ref: true")
        if config.ref_model_path is not None and not config.use_ref:
            raise ConfigError("init: ref_model_path needs use_ref: true (a reference is kept only for the KL loss)")
        _check_schedule(config)
        if config.loss_agg_mode == "seq-mean-token-sum-norm" and config.sum_norm_length() is None:
            raise ConfigError("init: loss_agg_mode seq-mean-token-sum-norm needs max_response_length (or loss_scale_factor)")
        return config

    def sum_norm_length(self) -> float | None:
        """L of seq-mean-token-sum-norm: loss_scale_factor, else max_response_length (None when neither is set)."""
        if self.loss_scale_factor is not None:
            return float(self.loss_scale_factor)
        return None if self.max_response_length is None else float(self.max_response_length)


def _check_schedule(config: WorkerConfig) -> None:
    """The learning-rate schedule's settings that would otherwise fail (or silently do nothing) at the first step."""
    if config.total_optimizer_steps is None:
        if config.lr_scheduler_type == "cosine":
            raise ConfigError("init: lr_scheduler_type cosine needs total_optimizer_steps")
        if config.lr_warmup_steps < 0 and config.lr_warmup_steps_ratio > 0:
            raise ConfigError("init: lr_warmup_steps_ratio needs total_optimizer_steps")
