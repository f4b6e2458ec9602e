"""LoRA adapters served per request, as SGLang's --enable-lora does: `/load_lora_adapter` reads a PEFT folder under a
name, `/unload_lora_adapter` drops it, and a /generate request names its adapter in `lora_path` (a name that is not
loaded is a 400, never the base model).

The base model stays as it is. Each adapted nn.Linear gets a forward hook that adds, for the batch rows running an
adapter, (x·Aᵀ·Bᵀ)·scale: rows of one decode step may run different adapters, or none (multi-LoRA batching). The
scheduler names each row's adapter (`rows`) around every model call, on its own thread, which is also the only thread
that loads or unloads (through a WeightUpdate), so a row never sees an adapter change mid-generation.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch
from safetensors.torch import load_file

_KEY = re.compile(r"^(?:base_model\.model\.)?(?P<module>.+)\.lora_(?P<ab>[AB])(?:\.[^.]+)?\.weight$")


class AdapterError(Exception):
    """An adapter folder that cannot be served (missing files, unknown modules, a rank above --max-lora-rank)."""


@dataclass
class Adapter:
    name: str
    path: str
    rank: int
    scale: float
    # module name -> (A [r, in], B [out, r]) in the served model's dtype and device
    weights: dict[str, tuple[torch.Tensor, torch.Tensor]]


class LoraAdapters:
    def __init__(self, model: torch.nn.Module, max_rank: int | None = None, target_modules: list[str] | None = None) -> None:
        self.model = model
        self.max_rank = max_rank
        self.target_modules = target_modules
        self.adapters: dict[str, Adapter] = {}
        self.rows: list[str | None] = []
        self._linears = {name: m for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
        self._hooked: set[str] = set()

    def names(self) -> dict[str, str]:
        return {name: adapter.path for name, adapter in self.adapters.items()}

    def read(self, name: str, path: str) -> Adapter:
        """An adapter folder checked against the served model, not yet served (no state changes)."""
        folder = Path(path)
        config_file, weights_file = folder / "adapter_config.json", folder / "adapter_model.safetensors"
        if not config_file.is_file() or not weights_file.is_file():
            raise AdapterError(f"{path}: needs adapter_config.json and adapter_model.safetensors (a PEFT adapter folder)")
        config = json.loads(config_file.read_text())
        rank, alpha = int(config["r"]), float(config.get("lora_alpha", config["r"]))
        if self.max_rank is not None and rank > self.max_rank:
            raise AdapterError(f"{path}: rank {rank} exceeds --max-lora-rank {self.max_rank}")
        scale = alpha / (rank ** 0.5) if config.get("use_rslora") else alpha / rank
        pairs: dict[str, dict[str, torch.Tensor]] = {}
        for key, tensor in load_file(str(weights_file)).items():
            match = _KEY.match(key)
            if not match:
                raise AdapterError(f"{path}: {key} is not a LoRA A or B weight")
            pairs.setdefault(match["module"], {})[match["ab"]] = tensor
        weights = {}
        param = next(self.model.parameters())
        for module, pair in pairs.items():
            linear = self._linears.get(module)
            if linear is None or set(pair) != {"A", "B"}:
                raise AdapterError(f"{path}: {module} is not a linear layer of the served model, or lacks its A or B")
            if self.target_modules is not None and module.rsplit(".", 1)[-1] not in self.target_modules:
                raise AdapterError(f"{path}: {module} is outside --lora-target-modules {' '.join(self.target_modules)}")
            a, b = pair["A"], pair["B"]
            if a.shape != (rank, linear.in_features) or b.shape != (linear.out_features, rank):
                raise AdapterError(f"{path}: {module} has A {tuple(a.shape)} and B {tuple(b.shape)}, not rank {rank} of the layer")
            weights[module] = (a.to(param.device, param.dtype), b.to(param.device, param.dtype))
        return Adapter(name, path, rank, scale, weights)

    def load(self, adapter: Adapter) -> int:
        """Serves `adapter` (scheduler thread only). Returns how many tensors it holds."""
        for module in adapter.weights:
            if module not in self._hooked:
                self._linears[module].register_forward_hook(partial_hook(self, module))
                self._hooked.add(module)
        self.adapters[adapter.name] = adapter
        return 2 * len(adapter.weights)

    def unload(self, name: str) -> int:
        adapter = self.adapters.pop(name)
        return 2 * len(adapter.weights)

    @contextmanager
    def active(self, rows: list[str | None]) -> Iterator[None]:
        """The adapter of each batch row (None: the base model) for the model calls inside."""
        self.rows = rows
        try:
            yield
        finally:
            self.rows = []

    def _delta(self, module: str, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor | None:
        if not any(self.rows):
            return None
        result = None
        for name in set(r for r in self.rows if r is not None):
            pair = self.adapters[name].weights.get(module)
            if pair is None:
                continue
            a, b = pair
            index = torch.tensor([i for i, r in enumerate(self.rows) if r == name], device=out.device)
            if result is None:
                result = out.clone()
            # peft's order: base output + lora_B(lora_A(x)) * scale
            result[index] = out[index] + (x[index] @ a.T @ b.T) * self.adapters[name].scale
        return result


def partial_hook(adapters: LoraAdapters, module: str):
    def hook(_module: torch.nn.Module, inputs: tuple, output: torch.Tensor) -> torch.Tensor | None:
        return adapters._delta(module, inputs[0], output)

    return hook
