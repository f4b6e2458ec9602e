"""The sharded policy (and reference) model and the commands that act on it. Every rank runs every method."""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Iterator

import torch
import torch.distributed as dist
from safetensors.torch import save_file
from torch import Tensor

from . import algos, lora
from .batch import Plan, load_batch, mini_batches, pack_rows, plan_micro_batches, sequence_lengths, shared_prefix_length
from .config import ConfigError, WorkerConfig
from .lr_schedule import make_scheduler
from .weight_sync import WeightSender

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
# Below this many shared tokens, the second model call of a shared prefix costs about what it saves.
MIN_SHARED_PREFIX = 16


def _shard(
    model: torch.nn.Module, device: torch.device, param_dtype: torch.dtype | None, reshard: bool, offload: bool = False
) -> tuple[torch.nn.Module, str]:
    """FSDP2 `fully_shard` on every decoder layer, then on the whole model; FSDP1 where torch lacks FSDP2. One rank
    without mixed precision or offload keeps the plain model: there is nothing to shard, and FSDP's hooks would cost
    time and forbid the shared-prefix backward (`Trainer._shareable_prefix`)."""
    if dist.get_world_size() == 1 and param_dtype is None and not offload:
        return model, "none"
    layer_classes = set(getattr(model, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in layer_classes]
    try:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    except ImportError:  # torch < 2.6 keeps FSDP2 under _composable; older still only has FSDP1
        try:
            from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard  # type: ignore
        except ImportError:
            fully_shard = None  # type: ignore
    if fully_shard is not None:
        mp = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32) if param_dtype else MixedPrecisionPolicy()
        extra: dict[str, Any] = {}
        if offload:
            try:
                from torch.distributed.fsdp import CPUOffloadPolicy
            except ImportError:  # torch < 2.6
                from torch.distributed._composable.fsdp import CPUOffloadPolicy  # type: ignore

            # On a CPU the shards already live in host memory; the policy still runs (what the CPU tests check).
            extra["offload_policy"] = CPUOffloadPolicy(pin_memory=device.type == "cuda")
        for layer in layers:
            fully_shard(layer, mp_policy=mp, reshard_after_forward=reshard, **extra)
        fully_shard(model, mp_policy=mp, reshard_after_forward=reshard, **extra)
        return model, "fsdp2"
    from functools import partial

    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

    policy = partial(transformer_auto_wrap_policy, transformer_layer_cls={type(m) for m in layers})
    mixed = MixedPrecision(param_dtype=param_dtype, reduce_dtype=torch.float32) if param_dtype else None
    wrapped = FullyShardedDataParallel(
        model, auto_wrap_policy=policy, mixed_precision=mixed, use_orig_params=True,
        device_id=device if device.type == "cuda" else None,
    )
    return wrapped, "fsdp1"


class Trainer:
    def __init__(self, config: WorkerConfig) -> None:
        from transformers import AutoModelForCausalLM

        self.config = config
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
        self.step = 0
        self._seed(config.seed)
        master_dtype = torch.float32 if config.dtype == "float32" else torch.bfloat16
        compute_dtype = torch.bfloat16 if self.device.type == "cuda" else None
        model_dir = Path(config.model_path)
        if not (model_dir / "config.json").exists():
            raise ConfigError(f"init: model_path {config.model_path} has no config.json")
        hf_config = json.loads((model_dir / "config.json").read_text())
        # save_weights writes this dtype by default, so SGLang gets the checkpoint's own precision back.
        self.saved_dtype = hf_config.get("torch_dtype") or hf_config.get("dtype") or "float32"

        varlen = self.device.type == "cuda" and _has_flash_attn()
        self.packed = config.use_remove_padding and (varlen or config.packed_sdpa) and _transformers_packs()
        if config.use_remove_padding and not self.packed and not varlen:
            print("agentrl worker: use_remove_padding packs only with flash-attn's varlen kernel (a GPU); padding here", flush=True)
        attn = "flash_attention_2" if self.packed and varlen else "sdpa"

        def load(folder: Path = model_dir) -> torch.nn.Module:
            model = AutoModelForCausalLM.from_pretrained(folder, dtype=master_dtype, attn_implementation=attn)
            return model.to(self.device)

        self.model = load()
        self.model.config.use_cache = False
        if config.gradient_checkpointing:
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.lora = config.lora_rank > 0
        if self.lora:  # the same seed on every rank: each rank's copy of the fresh adapter must be the same
            torch.manual_seed(config.seed)
            if config.gradient_checkpointing:  # the frozen embeddings' output must carry gradients into the layers
                self.model.enable_input_require_grads()
            self.model = lora.wrap(self.model, config.lora_rank, config.lora_alpha, config.target_modules, config.exclude_modules)
            self._seed(config.seed)
        self.model, self.fsdp = _shard(self.model, self.device, compute_dtype, config.reshard_after_forward, offload=config.param_offload)
        self._weights = WeightSender(self.model, self.rank, self.device, self.saved_dtype, merge_lora=self.lora)
        self.ref = None
        # With LoRA the reference is the policy with its adapter disabled (`_reference`): no second copy, unless
        # ref_model_path names another model.
        ref_dir = Path(config.ref_model_path) if config.ref_model_path is not None else model_dir
        if config.ref_model_path is not None:
            if not (ref_dir / "config.json").exists():
                raise ConfigError(f"init: ref_model_path {config.ref_model_path} has no config.json")
            ref_vocab = json.loads((ref_dir / "config.json").read_text()).get("vocab_size")
            if ref_vocab != hf_config.get("vocab_size"):
                raise ConfigError(
                    f"init: ref_model_path {config.ref_model_path} has vocab_size {ref_vocab}, the policy "
                    f"{config.model_path} {hf_config.get('vocab_size')}: the KL compares the same tokens' log-probs"
                )
        if config.use_ref and (not self.lora or config.ref_model_path is not None):
            # With ref_offload the reference is loaded on the CPU and FSDP2 moves each layer's shards in for compute.
            self.ref = load(ref_dir) if not config.ref_offload else AutoModelForCausalLM.from_pretrained(
                ref_dir, dtype=master_dtype, attn_implementation=attn
            )
            self.ref.requires_grad_(False)
            self.ref.eval()
            self.ref, _ = _shard(self.ref, self.device, compute_dtype, True, offload=config.ref_offload)
        # With LoRA only the adapter requires gradients, and the optimizer holds only it.
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad], lr=config.lr, betas=tuple(config.betas), weight_decay=config.weight_decay
        )
        # verl's warm-up and constant/cosine schedule, stepped once per optimizer step (lr_schedule.py).
        self.scheduler = make_scheduler(
            self.optimizer,
            lr_warmup_steps=config.lr_warmup_steps,
            lr_warmup_steps_ratio=config.lr_warmup_steps_ratio,
            total_steps=config.total_optimizer_steps,
            scheduler_type=config.lr_scheduler_type,
            min_lr_ratio=config.min_lr_ratio,
            num_cycles=config.num_cycles,
        )

    # --- helpers ----------------------------------------------------------------------------------------------

    @property
    def _has_ref(self) -> bool:
        return self.ref is not None or (self.lora and self.config.use_ref)

    @contextmanager
    def _reference(self) -> Iterator[torch.nn.Module]:
        """The reference model: the frozen copy, or with LoRA (and no ref_model_path) the policy itself with its adapter
        disabled."""
        if self.ref is not None:
            yield self.ref
            return
        with self.model.disable_adapter():  # type: ignore[operator]
            yield self.model

    def _seed(self, seed: int) -> None:
        random.seed(seed + self.rank)
        torch.manual_seed(seed + self.rank)

    def _plan(self, batch: dict[str, Tensor], rows: list[int]) -> Plan:
        if self.packed:  # a packed micro-batch holds its rows' attended tokens only
            lengths = [int(n) for n in batch["attention_mask"].sum(-1).tolist()]
        else:
            lengths = sequence_lengths(batch["attention_mask"])
        return plan_micro_batches(rows, lengths, self.world, self.config.micro_batch_token_budget, packed=self.packed)

    def _forward(
        self, model: torch.nn.Module, batch: dict[str, Tensor], rows: list[int], with_entropy: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        """Log-probs (and entropies) [b, t] of the rows' response tokens, aligned with input_ids and trimmed to the
        micro-batch's longest row; 0 on every other position. The lm_head runs only at the positions that predict a
        response token (logits_to_keep), which skips the prompt, and in chunks (`algos.head_log_probs`): with a 151k
        vocabulary the logits dominate the cost. Packed (use_remove_padding), the rows run as one sequence without
        padding; padded, each row is padded to the longest and the lm_head runs on every column that predicts a
        response token in some row. An empty micro-batch runs one pad token so the rank still joins FSDP's
        collectives."""
        if not rows:
            input_ids = torch.zeros(1, 2, dtype=torch.long, device=self.device)
            attention, response = torch.ones_like(input_ids), torch.zeros_like(input_ids, dtype=torch.bool)
        else:
            length = max(sequence_lengths(batch["attention_mask"][rows]))
            input_ids = batch["input_ids"][rows, :length].to(self.device)
            attention = batch["attention_mask"][rows, :length].to(self.device)
            response = batch["response_mask"][rows, :length].to(self.device).bool()
        if rows and self.packed:
            return self._forward_packed(model, input_ids, attention, response, with_entropy)
        targets = response.any(dim=0).nonzero().squeeze(-1)  # columns t holding a response token in some row
        if targets.numel() == 0:
            targets = torch.tensor([input_ids.shape[1] - 1], device=self.device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        inputs: dict[str, Any] = {
            "input_ids": input_ids, "attention_mask": attention, "position_ids": positions, "logits_to_keep": targets - 1,
        }
        prefix = self._shareable_prefix(input_ids, attention, targets)
        if prefix:
            inputs = _after_shared_prefix(model, prefix, **inputs)
        picked, picked_entropy = self._head_forward(model, input_ids[:, targets], with_entropy, **inputs)
        # where(), not a product with the mask: positions outside the response must read +0.0, not -0.0.
        keep = response[:, targets]

        def spread(values: Tensor) -> Tensor:
            out = torch.zeros(input_ids.shape, dtype=torch.float32, device=self.device)
            return out.index_copy(1, targets, torch.where(keep, values, 0.0))

        return spread(picked), None if picked_entropy is None else spread(picked_entropy)

    def _shareable_prefix(self, input_ids: Tensor, attention: Tensor, targets: Tensor) -> int:
        """How many leading tokens of a padded micro-batch run once for all its rows (`_after_shared_prefix`): the
        rows' common prefix, up to the first position that predicts a response token. A GRPO group's samples share
        their whole prompt and most rows share a system prompt, so this is most of a row's tokens when responses are
        short (the CPU demo: a 221-token prompt, 20 response tokens). Off for a prefix too short to pay for a second
        model call, and under gradients wherever the prefix's backward would not be plain autograd: FSDP frees a
        layer's gathered weights after the first of the layer's two backward passes, and gradient checkpointing
        turns the cache off."""
        if not self.config.share_prefix or input_ids.shape[0] < 2:
            return 0
        if torch.is_grad_enabled() and (self.fsdp != "none" or self.config.gradient_checkpointing):
            return 0
        prefix = shared_prefix_length(input_ids, attention, int(targets.min()) - 1)
        return prefix if prefix >= MIN_SHARED_PREFIX else 0

    def _forward_packed(
        self, model: torch.nn.Module, input_ids: Tensor, attention: Tensor, response: Tensor, with_entropy: bool
    ) -> tuple[Tensor, Tensor | None]:
        """`_forward` on the rows packed into one sequence: no attention mask, position ids restarting at 0 per row.
        From those, transformers builds the block-diagonal causal mask (sdpa, eager) or cuts the sequence for
        flash-attn's varlen kernel (flash_attention_2), so no token attends across rows."""
        packed = pack_rows(input_ids, attention, response)
        targets = packed.targets
        if targets.numel() == 0:  # a row without response tokens still runs, for FSDP's collectives
            targets = torch.tensor([packed.input_ids.shape[1] - 1], device=self.device)
        picked, picked_entropy = self._head_forward(
            model, packed.input_ids[:, targets], with_entropy,
            input_ids=packed.input_ids, position_ids=packed.position_ids, logits_to_keep=targets - 1,
        )
        where = (packed.row[targets], packed.col[targets])
        keep = response[where]

        def spread(values: Tensor) -> Tensor:
            out = torch.zeros(input_ids.shape, dtype=torch.float32, device=self.device)
            return out.index_put(where, torch.where(keep, values[0], 0.0))

        return spread(picked), None if picked_entropy is None else spread(picked_entropy)

    def _head_forward(self, model: torch.nn.Module, labels: Tensor, with_entropy: bool, **inputs: Any) -> tuple[Tensor, Tensor | None]:
        """Runs the model with its lm_head replaced by `algos.head_log_probs` of `labels` [b, k] (the tokens the k
        kept positions predict): the full logits never exist. Replacing only the head's forward keeps the model whole,
        so FSDP gathers, reshards and reduces the head's weight as it does for the plain model."""
        head = _unwrapped(model).get_output_embeddings()
        config = self.config

        def head_forward(hidden: Tensor) -> Tensor:
            flat = hidden.reshape(-1, hidden.shape[-1])
            picked, entropy = algos.head_log_probs(
                flat, head.weight, labels.reshape(-1), config.temperature, config.logprob_chunk_tokens, with_entropy, head.bias
            )
            parts = [picked] if entropy is None else [picked, entropy]
            # stack() of the reshaped parts is a new tensor: FSDP2 warns on a model output that is a view.
            return torch.stack([part.reshape(hidden.shape[:-1]) for part in parts], dim=-1)

        head.forward = head_forward
        try:
            out = model(**{"use_cache": False, **inputs}).logits
        finally:
            del head.forward  # back to the class's forward
        return out[..., 0], out[..., 1] if with_entropy else None

    def _advantages(self, batch: dict[str, Tensor]) -> Tensor:
        if "rewards" not in batch or "group_ids" not in batch:
            raise ConfigError("update: the batch needs rewards and group_ids")
        estimator = (
            algos.rloo_advantages
            if self.config.adv_estimator == "rloo"
            else partial(algos.grpo_advantages, norm_by_std=self.config.norm_adv_by_std_in_grpo)
        )
        try:
            return algos.episode_advantages(batch["rewards"], batch["group_ids"], batch.get("episode_ids"), estimator)
        except ValueError as err:  # an episode whose rows disagree is the caller's batch error
            raise ConfigError(f"update: {err}") from err

    # --- commands ---------------------------------------------------------------------------------------------

    @torch.no_grad()
    def compute_log_probs(self, batch_path: str, out_path: str) -> dict[str, Any]:
        """Writes old_log_probs, entropy and (with a reference) ref_log_probs, all [B, T] float32, to out_path. The
        metrics time the parts (rank 0's view): reading the batch, the policy's and the reference's forwards (each
        writing its rows into the [B, T] tensors), and summing the ranks' tensors into rank 0 and writing the file."""
        timer = _Timer(self.device)
        with timer.part("batch_read"):
            batch = load_batch(batch_path)
        size, seq_len = batch["input_ids"].shape
        plan = self._plan(batch, list(range(size)))
        names = ["old_log_probs", "entropy"] + (["ref_log_probs"] if self._has_ref else [])
        # Each row is written by exactly one rank and is 0 on the others, so a sum over ranks assembles the batch.
        tensors = {name: torch.zeros(size, seq_len, dtype=torch.float32, device=self.device) for name in names}
        self.model.eval()
        for rows in plan.per_rank[self.rank]:
            index = torch.tensor(rows, dtype=torch.long, device=self.device)
            with timer.part("old_log_prob_actor"):
                log_probs, entropy = self._forward(self.model, batch, rows)
                if rows:
                    width = log_probs.shape[1]
                    tensors["old_log_probs"][:, :width].index_copy_(0, index, log_probs.float())
                    tensors["entropy"][:, :width].index_copy_(0, index, entropy.float())  # type: ignore[union-attr]
            if self._has_ref:
                with timer.part("ref"), self._reference() as reference:
                    ref = self._forward(reference, batch, rows, with_entropy=False)[0]
                    if rows:
                        tensors["ref_log_probs"][:, : ref.shape[1]].index_copy_(0, index, ref.float())
        metrics: dict[str, Any] = {}
        with timer.part("log_prob_save"):
            if self.world > 1:
                for name in names:
                    dist.reduce(tensors[name], dst=0, op=dist.ReduceOp.SUM)
            if self.rank == 0:
                metrics = self._log_prob_outputs(batch, {name: t.cpu() for name, t in tensors.items()}, out_path)
        metrics.update(timer.metrics())
        return {"path": out_path, "metrics": metrics}

    def _log_prob_outputs(self, batch: dict[str, Tensor], tensors: dict[str, Tensor], out_path: str) -> dict[str, Any]:
        """Rank 0: the [B, T] tensors written to out_path, and the entropy and mismatch metrics."""
        mask = batch["response_mask"].float()
        metrics: dict[str, Any] = {"actor/entropy": algos.masked_mean(tensors["entropy"], mask).item()}
        for name, positions in algos.response_turn_classes(batch["response_mask"]).items():
            if positions.any():  # e.g. a batch of single-turn answers has no tool_turns
                metrics[f"actor/entropy/{name}"] = algos.masked_mean(tensors["entropy"], positions).item()
        if "rollout_log_probs" in batch:
            metrics.update(_mismatch_metrics(tensors["old_log_probs"], batch["rollout_log_probs"], mask))
        _atomic_save(tensors, out_path)
        return metrics

    def update(self, batch_path: str, log_probs_path: str | None) -> dict[str, Any]:
        """GRPO/PPO over mini-batches of whole prompts for ppo_epochs; returns metrics averaged over optimizer steps."""
        config = self.config
        timer = _Timer(self.device)
        with timer.part("batch_read"):
            batch = load_batch(batch_path, log_probs_path)
        if "old_log_probs" not in batch:
            raise ConfigError("update: old_log_probs missing; pass the file compute_log_probs wrote as log_probs")
        if config.use_kl_loss and "ref_log_probs" not in batch:
            raise ConfigError("update: use_kl_loss needs ref_log_probs from compute_log_probs")
        advantages = self._advantages(batch)
        mask_all = batch["response_mask"].float()
        is_weights, is_stats = None, {}
        if config.rollout_is_threshold is not None and "rollout_log_probs" in batch:
            is_weights, is_stats = algos.rollout_is_weights(
                batch["old_log_probs"], batch["rollout_log_probs"], config.rollout_is_threshold, mask_all, config.rollout_is_mode
            )
        self.model.train()
        history: list[dict[str, float]] = []
        for epoch in range(config.ppo_epochs):
            # Seeded by the optimizer step, so a resumed run draws the same mini-batches.
            shuffle = torch.Generator().manual_seed(config.seed * 1_000_003 + self.step * 997 + epoch) if config.shuffle else None
            for rows in mini_batches(batch["group_ids"], config.ppo_mini_batch_size, shuffle):
                history.append(self._optimizer_step(batch, rows, advantages, is_weights, timer))
        metrics = {key: sum(h[key] for h in history) / len(history) for key in history[0]}
        metrics["actor/ratio_max"] = max(h["actor/ratio_max"] for h in history)
        metrics["actor/ratio_min"] = min(h["actor/ratio_min"] for h in history)
        metrics["actor/pg_loss_first"] = history[0]["actor/pg_loss"]
        metrics["actor/optimizer_steps"] = len(history)
        metrics["actor/advantage_mean"] = algos.masked_mean(advantages.unsqueeze(-1).expand_as(mask_all), mask_all).item()
        if "rollout_log_probs" in batch:
            metrics.update(_mismatch_metrics(batch["old_log_probs"], batch["rollout_log_probs"], mask_all))
        metrics.update(is_stats)
        metrics.update(timer.metrics())  # summed over the call's optimizer steps, not averaged
        # Per-row advantages go back to the CLI for the trajectory records (inspect --group shows them).
        return {"metrics": metrics, "step": self.step, "advantages": [float(a) for a in advantages.tolist()]}

    def _optimizer_step(
        self, batch: dict[str, Tensor], rows: list[int], advantages: Tensor, is_weights: Tensor | None, timer: "_Timer"
    ) -> dict[str, float]:
        with timer.part("forward_backward"):
            metrics = self._accumulate_gradients(batch, rows, advantages, is_weights)
        with timer.part("optimizer"):
            grad_norm, lr, skipped = self._clip_and_step()
        if grad_norm is not None:
            metrics["actor/grad_norm"] = grad_norm
        metrics["actor/lr"] = lr
        metrics["actor/skipped_step"] = skipped
        return metrics

    def _accumulate_gradients(
        self, batch: dict[str, Tensor], rows: list[int], advantages: Tensor, is_weights: Tensor | None
    ) -> dict[str, float]:
        """Leaves in the parameters' .grad the gradient of one mini-batch's loss (the `rows` of every rank together):

            loss = policy_loss - entropy_coeff * agg_loss(entropy) + kl_loss_coef * agg_loss(kl_penalty(logp, ref))

        with the algos functions on each micro-batch, normalised by the whole mini-batch's `agg_norm` (and token count
        for the token metrics), so the micro-batch losses sum to the loss of the mini-batch computed in one go. FSDP
        averages gradients over ranks, so each rank's share is scaled by the world size. Returns the mini-batch's
        metrics, summed over micro-batches and ranks."""
        config = self.config
        mode, length = config.loss_agg_mode, config.sum_norm_length()
        mask = batch["response_mask"][rows]
        norm = algos.agg_norm(mask, mode, length)
        # GSPO's policy loss is a mean over sequences of each one's token mean, whatever loss_agg_mode says (as verl).
        pg_mode = "seq-mean-token-mean" if config.loss_mode == "gspo" else mode
        pg_norm = algos.agg_norm(mask, pg_mode, length)
        tokens = float(mask.sum().item())
        # verl computes the entropy with gradients only when it is part of the loss.
        with_entropy = config.entropy_coeff != 0
        sums = {name: 0.0 for name in ("actor/pg_loss", "actor/kl_loss", "actor/pg_clipfrac", "actor/pg_clipfrac_lower", "actor/ppo_kl")}
        if with_entropy:
            sums["actor/entropy"] = 0.0
        extremes = {"actor/ratio_max": -float("inf"), "actor/ratio_min": float("inf")}
        self.optimizer.zero_grad(set_to_none=True)
        for micro in self._plan(batch, rows).per_rank[self.rank]:
            log_probs, entropy = self._forward(self.model, batch, micro, with_entropy=with_entropy)
            if not micro:
                (log_probs.sum() * 0.0).backward()
                continue
            width = log_probs.shape[1]
            m = batch["response_mask"][micro, :width].float().to(self.device)
            pg, pg_metrics = algos.policy_loss(
                log_probs, batch["old_log_probs"][micro, :width].to(self.device), advantages[micro].to(self.device), m,
                config.clip_ratio_low, config.clip_ratio_high, config.clip_ratio_c, pg_mode,
                rollout_is_weights=is_weights[micro, :width].to(self.device) if is_weights is not None else None,
                loss_scale_factor=length, global_norm=pg_norm, global_tokens=tokens, loss_mode=config.loss_mode,
            )
            loss = pg
            parts = {"actor/pg_loss": pg, **{f"actor/{k}": pg_metrics[k] for k in ("pg_clipfrac", "pg_clipfrac_lower", "ppo_kl")}}
            if entropy is not None:
                ent = algos.agg_loss(entropy, m, mode, length, norm)
                loss = loss - config.entropy_coeff * ent
                parts["actor/entropy"] = ent
            if config.use_kl_loss:
                ref = batch["ref_log_probs"][micro, :width].to(self.device)
                kl = algos.agg_loss(algos.kl_penalty(log_probs, ref, config.kl_loss_type), m, mode, length, norm)
                loss = loss + config.kl_loss_coef * kl
                parts["actor/kl_loss"] = kl
            (loss * self.world).backward()
            for name, value in parts.items():
                sums[name] += value.item()
            extremes["actor/ratio_max"] = max(extremes["actor/ratio_max"], pg_metrics["ratio_max"].item())
            extremes["actor/ratio_min"] = min(extremes["actor/ratio_min"], pg_metrics["ratio_min"].item())
        metrics = _all_reduce(sums, dist.ReduceOp.SUM, self.device)
        metrics.update(_all_reduce(extremes, dist.ReduceOp.MAX, self.device, negate=("actor/ratio_min",)))
        return metrics

    def _full_model_state(self) -> dict[str, Tensor]:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def save_weights(self, out_dir: str, dtype: str | None) -> dict[str, Any]:
        """A Hugging Face folder (config, tokenizer, model.safetensors) loadable by transformers and SGLang."""
        state = self._full_model_state()
        if self.rank == 0:
            if self.lora:  # the merged model, W + B·A·(alpha/r), under the Hugging Face names
                state = lora.merged_state(state, lora.scaling(self.model))
            name = dtype or self.saved_dtype or "float32"
            target = getattr(torch, name, None)
            if not isinstance(target, torch.dtype):
                raise ConfigError(f"save_weights: unknown dtype {name!r}")
            if getattr(self.model.config, "tie_word_embeddings", False):
                state.pop("lm_head.weight", None)
            tensors = {k: v.to(target).contiguous().clone() for k, v in state.items()}
            out = Path(out_dir)
            tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            for item in Path(self.config.model_path).iterdir():
                if item.is_file() and not item.name.endswith(WEIGHT_SUFFIXES) and not item.name.endswith(".index.json"):
                    shutil.copyfile(item, tmp / item.name)
            save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
            shutil.rmtree(out, ignore_errors=True)
            os.replace(tmp, out)
        dist.barrier()
        return {"path": out_dir, "step": self.step}

    def save_adapter(self, out_dir: str) -> dict[str, Any]:
        """LoRA: the adapter alone, as PEFT saves it (adapter_config.json, adapter_model.safetensors in float32), written
        to a temporary folder and renamed over `out_dir`: what SGLang's /load_lora_adapter and the embedded engine
        load, and `PeftModel.from_pretrained` too."""
        if not self.lora:
            raise ConfigError("save_adapter: the worker trains no LoRA adapter (lora_rank is 0)")
        state = self._full_model_state()
        size = 0
        if self.rank == 0:
            tensors = {k: v.float().contiguous().clone() for k, v in lora.adapter_state(state).items()}
            out = Path(out_dir)
            tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            save_file(tensors, str(tmp / "adapter_model.safetensors"), metadata={"format": "pt"})
            config = lora.adapter_config(self.model, str(Path(self.config.model_path).resolve()))
            (tmp / "adapter_config.json").write_text(json.dumps(config, indent=2, default=str))
            size = (tmp / "adapter_model.safetensors").stat().st_size
            shutil.rmtree(out, ignore_errors=True)
            os.replace(tmp, out)
        dist.barrier()
        return {"path": out_dir, "step": self.step, "bytes": size}

    # --- weights without disk (weight_sync.py, docs/worker-protocol.md) ---------------------------------------

    @property
    def _sender(self) -> WeightSender:
        if self.fsdp == "fsdp1":  # FSDP1's flat parameters carry neither the Hugging Face names nor the full shapes
            raise ConfigError("weight sync without disk needs FSDP2 (torch >= 2.6); set update_weights.method to disk")
        return self._weights

    def init_weights_group(self, master_address: str, master_port: int, world_size: int, group_name: str, backend: str, timeout_s: float) -> dict[str, Any]:
        return self._sender.join(master_address, master_port, world_size, group_name, backend, timeout_s)

    def plan_weight_buckets(self, bucket_bytes: int, dtype: str | None) -> dict[str, Any]:
        return self._sender.plan(bucket_bytes, dtype)

    def broadcast_weights(self, names: list[str], dtype: str | None) -> dict[str, Any]:
        return self._sender.broadcast(names, dtype)

    def serialize_weights(self, names: list[str], dtype: str | None) -> dict[str, Any]:
        return self._sender.serialize(names, dtype)

    def save_checkpoint(self, out_dir: str) -> dict[str, Any]:
        """Full model and optimizer state (rank 0), scheduler and step, and every rank's RNG state."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        model_state, optim_state = get_state_dict(
            self.model, self.optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )
        if self.lora:  # the frozen base is model_path's: the checkpoint holds the adapter (and its optimizer) only
            model_state = {k: v for k, v in model_state.items() if lora.is_adapter(k)}
        out = Path(out_dir)
        if self.rank == 0:
            out.mkdir(parents=True, exist_ok=True)
            torch.save({"model": model_state, "optimizer": optim_state}, out / "state.pt")
            torch.save({"scheduler": self.scheduler.state_dict(), "step": self.step}, out / "trainer.pt")
        dist.barrier()
        torch.save(_rng_state(), out / f"rng_rank{self.rank}.pt")
        dist.barrier()
        return {"path": out_dir, "step": self.step}

    def load_checkpoint(self, in_dir: str) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        path = Path(in_dir)
        if not (path / "state.pt").exists():
            raise ConfigError(f"load_checkpoint: {in_dir} has no state.pt")
        full = torch.load(path / "state.pt", weights_only=False)
        set_state_dict(
            self.model, self.optimizer, model_state_dict=full["model"], optim_state_dict=full["optimizer"],
            options=StateDictOptions(full_state_dict=True, strict=not self.lora),
        )
        if self.config.optimizer_offload:  # set_state_dict put the loaded state next to the parameters
            _move_optimizer_state(self.optimizer, offload=True)
        trainer = torch.load(path / "trainer.pt", weights_only=False)
        self.scheduler.load_state_dict(trainer["scheduler"])
        self.step = trainer["step"]
        rng = path / f"rng_rank{self.rank}.pt"
        if rng.exists():
            _set_rng_state(torch.load(rng, weights_only=False))
        return {"path": in_dir, "step": self.step}

    def fingerprint(self) -> dict[str, Any]:
        """SHA-256 of the full parameters and of the full optimizer state, to check resumes bit for bit."""
        import hashlib

        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        model_state, optim_state = get_state_dict(
            self.model, self.optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )
        if self.rank != 0:
            return {}

        def digest(tree: Any, h: "hashlib._Hash", prefix: str = "") -> None:
            if isinstance(tree, dict):
                for key in sorted(tree, key=str):
                    digest(tree[key], h, f"{prefix}/{key}")
            elif isinstance(tree, (list, tuple)):
                for i, item in enumerate(tree):
                    digest(item, h, f"{prefix}/{i}")
            elif isinstance(tree, Tensor):
                h.update(prefix.encode())
                h.update(tree.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes() if tree.dim() else tree.cpu().reshape(1).view(torch.uint8).numpy().tobytes())
            else:
                h.update(f"{prefix}={tree!r}".encode())

        params, optim = hashlib.sha256(), hashlib.sha256()
        digest(model_state, params)
        digest(optim_state, optim)
        return {"params": params.hexdigest(), "optimizer": optim.hexdigest(), "step": self.step}

    # --- supervised fine-tuning -------------------------------------------------------------------------------

    def _sft_micro_losses(self, batch: dict[str, Tensor], tokens: float, train: bool) -> dict[str, float]:
        """Runs every micro-batch of this rank over the whole batch: the negative log-likelihood of the loss-mask
        tokens, summed and divided by the batch's global token count, so the gradient (with FSDP's average over ranks
        undone by the world-size factor) is that of one token-mean over the whole batch, however it is cut."""
        nll_sum, token_sum = 0.0, 0.0
        for micro in self._plan(batch, list(range(batch["input_ids"].shape[0]))).per_rank[self.rank]:
            log_probs, _ = self._forward(self.model, batch, micro, with_entropy=False)
            if not micro:
                if train:
                    (log_probs.sum() * 0.0).backward()
                continue
            mask = batch["response_mask"][micro, : log_probs.shape[1]].float().to(self.device)
            loss = algos.sft_loss(log_probs, mask, tokens)
            if train:
                (loss * self.world).backward()
            nll_sum += loss.item() * tokens
            token_sum += mask.sum().item()
        if self.world == 1:  # nothing to sum over: the collective cost ~2% of a CPU demo SFT step
            return {"nll_sum": nll_sum, "tokens": token_sum}
        # On the trainer's device: NCCL cannot reduce CPU tensors.
        totals = torch.tensor([nll_sum, token_sum], dtype=torch.float64, device=self.device)
        dist.all_reduce(totals)
        return {"nll_sum": totals[0].item(), "tokens": totals[1].item()}

    def sft_step(self, batch_path: str) -> dict[str, Any]:
        """One optimizer step of supervised fine-tuning on the whole batch: token-mean cross-entropy over the tokens
        whose response_mask is 1 (the assistant tokens), then the same clipping, optimizer and schedule as `update`."""
        batch = load_batch(batch_path)
        tokens = float(batch["response_mask"].sum().item())
        if tokens == 0:
            raise ConfigError(f"sft_step: batch {batch_path} has no token with response_mask 1")
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        sums = self._sft_micro_losses(batch, tokens, train=True)
        grad_norm, lr, skipped = self._clip_and_step()
        return {
            "step": self.step,
            "metrics": {
                "sft/loss": sums["nll_sum"] / max(sums["tokens"], 1.0),
                "sft/tokens": sums["tokens"],
                **({} if grad_norm is None else {"sft/grad_norm": grad_norm}),
                "sft/lr": lr,
                "sft/skipped_step": skipped,
            },
        }

    @torch.no_grad()
    def sft_eval(self, batch_path: str) -> dict[str, Any]:
        """The same loss as `sft_step` on a validation batch, without gradients; the summed NLL and token count come
        back too, so the CLI can average over several batches exactly."""
        batch = load_batch(batch_path)
        tokens = max(float(batch["response_mask"].sum().item()), 1.0)
        self.model.eval()
        sums = self._sft_micro_losses(batch, tokens, train=False)
        return {"metrics": {"val/loss": sums["nll_sum"] / max(sums["tokens"], 1.0), "val/nll_sum": sums["nll_sum"], "val/tokens": sums["tokens"]}}

    def _clip_and_step(self) -> tuple[float | None, float, float]:
        """Clips the accumulated gradients to grad_clip, steps the optimizer unless the norm is not finite, steps the
        schedule. Returns (grad norm before clipping, the learning rate used, 1.0 if the step was skipped). A norm that
        is not finite comes back as None: JSON has no NaN, and the skipped step already says what happened."""
        if self.fsdp == "fsdp1":  # FSDP1's flat shards need its own method to see the global norm
            grad_norm = self.model.clip_grad_norm_(self.config.grad_clip)  # type: ignore[operator]
        else:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        if hasattr(grad_norm, "full_tensor"):
            grad_norm = grad_norm.full_tensor()
        norm = float(grad_norm)
        finite = bool(torch.isfinite(torch.tensor(norm)))
        if finite:
            if self.config.optimizer_offload:
                _move_optimizer_state(self.optimizer, offload=False)
            self.optimizer.step()
            if self.config.optimizer_offload:
                _move_optimizer_state(self.optimizer, offload=True)
        self.optimizer.zero_grad(set_to_none=True)
        lr = self.scheduler.get_last_lr()[0]
        self.scheduler.step()
        self.step += 1
        return (norm if finite else None), lr, 0.0 if finite else 1.0


class _Timer:
    """Seconds per named part of a command, reported as `timing_s/<part>` metrics: wall time by time.perf_counter,
    read after torch.cuda.synchronize() on CUDA so that the kernels a part queued count in that part. A part entered
    several times (one per micro- or mini-batch) sums."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.seconds: dict[str, float] = {}

    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        start = self._now()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + self._now() - start

    def metrics(self) -> dict[str, float]:
        return {f"timing_s/{name}": seconds for name, seconds in self.seconds.items()}


def _move_optimizer_state(optimizer: torch.optim.Optimizer, offload: bool) -> None:
    """optimizer_offload, as verl does it: AdamW's moments (two parameter-sized tensors per parameter) wait in CPU
    memory between optimizer steps (`offload`) and come back next to their parameter for the step. The step counter
    stays where AdamW keeps it. Under param_offload the parameters, and so the moments, are in CPU memory anyway."""
    for group in optimizer.param_groups:
        for param in group["params"]:
            state = optimizer.state.get(param, {})
            device = torch.device("cpu") if offload else param.device
            for key, value in state.items():
                if key != "step" and isinstance(value, Tensor) and value.device != device:
                    # Only the copy to the device may be asynchronous: the CPU copy is read right after.
                    state[key] = value.to(device, non_blocking=not offload)


def _transformers_packs() -> bool:
    """Whether transformers tells packed rows apart by their position ids (masking_utils, 4.53+); older versions would
    let the packed rows attend to each other, so the worker pads instead."""
    try:
        from transformers.masking_utils import find_packed_sequence_indices  # noqa: F401
    except ImportError:
        print("agentrl worker: this transformers cannot mask packed sequences; use_remove_padding is off", flush=True)
        return False
    return True


def _has_flash_attn() -> bool:
    import importlib.util

    return importlib.util.find_spec("flash_attn") is not None


def _after_shared_prefix(
    model: torch.nn.Module, prefix: int, input_ids: Tensor, attention_mask: Tensor, position_ids: Tensor, logits_to_keep: Tensor
) -> dict[str, Any]:
    """Runs the first `prefix` tokens, which every row has in common, once (one row, the real lm_head on its last
    position only), and returns the model inputs that run the rest of every row on that row's copy of the prefix's
    key/value cache. The log-probs are those of the full rows up to float rounding (1e-6 on the CPU demo), and
    autograd carries each row's gradient back through its cache copy into the one prefix pass, so the gradients are
    the full rows' too."""
    rows = input_ids.shape[0]
    cache = model(
        input_ids=input_ids[:1, :prefix], attention_mask=attention_mask[:1, :prefix], position_ids=position_ids[:1, :prefix],
        use_cache=True, logits_to_keep=1,
    ).past_key_values
    cache.batch_repeat_interleave(rows)
    return {
        "input_ids": input_ids[:, prefix:], "attention_mask": attention_mask, "position_ids": position_ids[:, prefix:],
        "past_key_values": cache, "use_cache": True, "logits_to_keep": logits_to_keep - prefix,
    }


def _unwrapped(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model under an FSDP1 wrapper (FSDP2 keeps the model object itself)."""
    return getattr(model, "_fsdp_wrapped_module", model)


def _mismatch_metrics(old: Tensor, rollout: Tensor, mask: Tensor) -> dict[str, float]:
    """How far the trainer's log-probs are from the rollout engine's on the same tokens (training-inference mismatch)."""
    return {
        "mismatch/kl": algos.masked_mean(rollout - old, mask).item(),
        "mismatch/k3": algos.masked_mean(algos.kl_penalty(rollout, old, "k3"), mask).item(),
        "mismatch/ratio_mean": algos.masked_mean(torch.exp(torch.clamp(old - rollout, -20, 20)), mask).item(),
    }


def _all_reduce(values: dict[str, float], op: Any, device: torch.device, negate: tuple[str, ...] = ()) -> dict[str, float]:
    """All-reduces named floats (the same names on every rank) in one float64 collective on `device` (NCCL needs a
    CUDA tensor); the `negate` names are reduced negated, so a MAX reduction gives their minimum."""
    names = sorted(values)
    sign = [-1.0 if name in negate else 1.0 for name in names]
    packed = torch.tensor([s * values[name] for s, name in zip(sign, names)], dtype=torch.float64, device=device)
    dist.all_reduce(packed, op=op)
    return {name: s * v for s, name, v in zip(sign, names, packed.tolist())}


def _rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def _atomic_save(tensors: dict[str, Tensor], path: str) -> None:
    """Writes next to the target and renames, so a reader never sees a half-written file."""
    tmp = f"{path}.tmp-{os.getpid()}"
    save_file({k: v.contiguous() for k, v in tensors.items()}, tmp)
    os.replace(tmp, path)
