"""Weights to the inference servers without disk: the trainer's end of SGLang's distributed and tensor updates.

The CLI asks for the plan (`plan_weight_buckets`: every parameter's Hugging Face name, dtype and shape, cut into
buckets of at most `bucket_bytes`), then for each bucket it announces the names to every server
(`/update_weights_from_distributed`) while this side broadcasts the same tensors in the same order
(`broadcast_weights`). With FSDP2 every rank gathers each full tensor (`full_tensor()`, a collective of the training
group) and only rank 0, the one member of the weight-update group, broadcasts it. docs/worker-protocol.md has the
commands; docs/architecture.md the sequence.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.distributed as dist
from torch import Tensor

from . import lora
from .config import ConfigError
from .weight_group import dtype_from_name, join_weight_group

# SGLang's default group name (InitWeightsUpdateGroupReqInput.group_name).
DEFAULT_GROUP = "weight_update_group"


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str
    shape: list[int]

    @property
    def nbytes(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count * dtype_from_name(self.dtype).itemsize


def plan_buckets(specs: list[TensorSpec], bucket_bytes: int) -> list[list[TensorSpec]]:
    """Consecutive tensors, in order, grouped so a bucket's bytes stay within `bucket_bytes`; a bigger tensor goes
    alone in a bucket of its own (a tensor is never split: SGLang loads whole parameters)."""
    if bucket_bytes <= 0:
        raise ConfigError(f"plan_weight_buckets: bucket_bytes must be > 0, got {bucket_bytes}")
    buckets: list[list[TensorSpec]] = []
    size = 0
    for spec in specs:
        if buckets and size + spec.nbytes <= bucket_bytes:
            buckets[-1].append(spec)
            size += spec.nbytes
        else:
            buckets.append([spec])
            size = spec.nbytes
    return buckets


class WeightSender:
    """The policy's parameters by Hugging Face name, gathered full, broadcast or serialized by rank 0."""

    def __init__(self, model: torch.nn.Module, rank: int, device: torch.device, default_dtype: str, merge_lora: bool = False) -> None:
        self.model = model
        # LoRA: the servers hold the Hugging Face model, so each adapted weight leaves merged (W + B·A·alpha/r).
        self.merged = {m.hf: m for m in lora.merged_names([n for n, _ in model.named_parameters()])} if merge_lora else None
        self.rank = rank
        self.device = device
        self.default_dtype = default_dtype
        self.group: dist.ProcessGroup | None = None
        # The last serialized bucket: its CUDA IPC handles point into these, so they live until the next bucket.
        self._lent: list[Tensor] = []

    def join(self, master_address: str, master_port: int, world_size: int, group_name: str, backend: str, timeout_s: float) -> dict:
        """Rank 0 joins the weight-update group as its rank 0 (it hosts the rendezvous); other ranks have no part."""
        if self.rank == 0:
            if self.group is not None:
                raise ConfigError("init_weights_group: the worker already has a weight-update group")
            self.group = join_weight_group(master_address, master_port, 0, world_size, group_name, backend, timeout_s)
        return {"backend": backend}

    def specs(self, dtype: str | None) -> list[TensorSpec]:
        name = self._dtype(dtype)
        if self.merged is not None:
            params = dict(self.model.named_parameters())
            return [TensorSpec(hf, name, list(params[m.base].shape)) for hf, m in self.merged.items()]
        return [TensorSpec(n, name, list(p.shape)) for n, p in self.model.named_parameters()]

    def plan(self, bucket_bytes: int, dtype: str | None) -> dict:
        buckets = plan_buckets(self.specs(dtype), bucket_bytes)
        return {"buckets": [
            {"names": [s.name for s in b], "dtypes": [s.dtype for s in b], "shapes": [s.shape for s in b]} for b in buckets
        ]}

    def broadcast(self, names: list[str], dtype: str | None) -> dict:
        # Only rank 0 knows whether it joined; every rank must refuse together, or the others would start gathering
        # (a collective) while rank 0 returns, and the training group would break.
        joined = [self.group is not None]
        if dist.is_initialized():  # a lone sender (the in-process tests) has no training group to agree with
            dist.broadcast_object_list(joined, src=0)
        if not joined[0]:
            raise ConfigError("broadcast_weights: send init_weights_group first")
        sent, failure = 0, None
        for tensor in self._full_tensors(names, dtype):
            # After a failed broadcast rank 0 keeps gathering: the other ranks' full_tensor() calls need it.
            if self.rank == 0 and failure is None:
                try:
                    dist.broadcast(tensor, src=0, group=self.group)
                    sent += tensor.numel() * tensor.element_size()
                except Exception as err:  # noqa: BLE001 (raised below, once the training group is back in step)
                    failure = err
        if failure is not None:
            raise RuntimeError(f"broadcast_weights: the broadcast to the weight-update group failed: {failure}") from failure
        return {"tensors": len(names), "bytes": sent}

    def serialize(self, names: list[str], dtype: str | None) -> dict:
        """SGLang's `serialized_named_tensors` entry for one bucket: a pickled [(name, tensor)] list whose CUDA tensors
        travel as IPC handles (torch's multiprocessing reductions), base64-encoded for JSON. Rank 0's only."""
        from multiprocessing.reduction import ForkingPickler

        import torch.multiprocessing  # noqa: F401  (registers torch's reductions with ForkingPickler)

        named = list(zip(names, self._full_tensors(names, dtype)))
        if self.rank != 0:
            return {"serialized": ""}
        self._lent = [tensor for _, tensor in named]
        buffer = io.BytesIO()
        ForkingPickler(buffer).dump(named)
        return {"serialized": base64.b64encode(buffer.getvalue()).decode("ascii")}

    def _full_tensors(self, names: list[str], dtype: str | None) -> Iterator[Tensor]:
        """Each named parameter whole, in `dtype`, on this rank's device; every rank must run this (collectives)."""
        params = dict(self.model.named_parameters())
        known = params if self.merged is None else self.merged
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ConfigError(f"unknown parameter(s) {', '.join(unknown[:5])}")
        target = dtype_from_name(self._dtype(dtype))
        scale = lora.scaling(self.model) if self.merged is not None else 1.0
        with torch.no_grad():
            for name in names:
                if self.merged is None:
                    yield _full(params[name].detach(), self.device).to(target).contiguous()
                    continue
                item = self.merged[name]
                value = _full(params[item.base].detach(), self.device)
                if item.lora_a is not None and item.lora_b is not None:
                    a, b = (_full(params[n].detach(), self.device) for n in (item.lora_a, item.lora_b))
                    value = lora.merge(value, a, b, scale)
                yield value.to(target).contiguous()

    def _dtype(self, dtype: str | None) -> str:
        name = dtype or self.default_dtype
        try:
            dtype_from_name(name)
        except ValueError as err:
            raise ConfigError(f"weights dtype: {err}") from None
        return name


def _full(param: Tensor, device: torch.device) -> Tensor:
    """A parameter's whole value: an FSDP2 DTensor is all-gathered (every rank calls this in the same order)."""
    from torch.distributed.tensor import DTensor

    if isinstance(param, DTensor):
        if param.device != device:  # param_offload keeps shards on the CPU; NCCL gathers on the GPU
            param = param.to(device)
        return param.full_tensor()
    return param.to(device)
