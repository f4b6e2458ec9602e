"""LoRA (issue 30): the policy as a peft model whose adapter alone trains, and the names and tensors the engine gets.

`wrap` puts a peft LoRA adapter on the loaded transformers model (before FSDP shards it; FSDP2 shards the frozen base
and the adapter alike). Every parameter then has peft's name (`base_model.model.<hf name with .base_layer>` for the
base, `...lora_A.default.weight` / `...lora_B.default.weight` for the adapter); the functions below turn a full state
dict of those names into what leaves the worker:

- `merged_state`: the Hugging Face model with every adapted weight merged, W + B·A·(alpha/r), under its own name
  (export, `save_weights`, and the merged weight sync);
- `adapter_state` and `adapter_config`: the adapter as PEFT saves it (`adapter_model.safetensors` keys without the
  adapter's name, `adapter_config.json`), which SGLang's `/load_lora_adapter`, the embedded engine and
  `PeftModel.from_pretrained` read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .config import ConfigError

PEFT_PREFIX = "base_model.model."
ADAPTER = "default"
_LORA_KEY = re.compile(r"^(?P<module>.+)\.lora_(?P<ab>[AB])\.(?:" + ADAPTER + r"\.)?weight$")


def wrap(model: torch.nn.Module, rank: int, alpha: float, target_modules: Any, exclude_modules: Any) -> torch.nn.Module:
    """The model under a fresh peft LoRA adapter (A random, B zero, so the policy starts as the base; no dropout, so
    forwards are deterministic). Only the adapter's parameters require gradients. The lm_head may not be adapted: the
    trainer replaces its forward with the chunked log-prob head."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=rank, lora_alpha=alpha, target_modules=target_modules, exclude_modules=exclude_modules, lora_dropout=0.0,
        bias="none",
    )
    try:
        wrapped = get_peft_model(model, config)
    except ValueError as err:  # peft's message names the target modules it could not find
        raise ConfigError(f"init: LoRA: {err}") from None
    from peft.tuners.lora import LoraLayer

    if isinstance(wrapped.get_output_embeddings(), LoraLayer):
        raise ConfigError("init: LoRA target_modules may not include the lm_head (the output embeddings)")
    return wrapped


def scaling(model: torch.nn.Module) -> float:
    config = model.peft_config[ADAPTER]  # type: ignore[union-attr,index]
    return float(config.lora_alpha) / float(config.r)


def hf_name(peft_name: str) -> str:
    """A base parameter's Hugging Face name: peft's prefix and `.base_layer` dropped."""
    name = peft_name[len(PEFT_PREFIX):] if peft_name.startswith(PEFT_PREFIX) else peft_name
    return name.replace(".base_layer.", ".")


def is_adapter(peft_name: str) -> bool:
    return ".lora_A." in peft_name or ".lora_B." in peft_name


@dataclass(frozen=True)
class MergedName:
    """One Hugging Face parameter of the merged model: its base parameter and, for an adapted weight, A and B."""

    hf: str
    base: str
    lora_a: str | None = None
    lora_b: str | None = None


def merged_names(peft_names: list[str]) -> list[MergedName]:
    """Every base parameter once, in peft's order, with the adapter pair that merges into it."""
    present = set(peft_names)
    out = []
    for name in peft_names:
        if is_adapter(name):
            continue
        if name.endswith(".base_layer.weight"):
            module = name[: -len(".base_layer.weight")]
            a, b = f"{module}.lora_A.{ADAPTER}.weight", f"{module}.lora_B.{ADAPTER}.weight"
            if a in present and b in present:
                out.append(MergedName(hf_name(name), name, a, b))
                continue
        out.append(MergedName(hf_name(name), name))
    return out


def merge(base: Tensor, lora_a: Tensor, lora_b: Tensor, scale: float) -> Tensor:
    """W + (B @ A) * scale, computed in float32 and returned in W's dtype (peft's merge, `get_delta_weight`)."""
    delta = (lora_b.float() @ lora_a.float()) * scale
    return (base.float() + delta).to(base.dtype)


def merged_state(state: dict[str, Tensor], scale: float) -> dict[str, Tensor]:
    """A full peft state dict as the merged Hugging Face model's state dict."""
    out: dict[str, Tensor] = {}
    for item in merged_names(list(state)):
        value = state[item.base]
        if item.lora_a is not None and item.lora_b is not None:
            value = merge(value, state[item.lora_a], state[item.lora_b], scale)
        out[item.hf] = value
    return out


def adapter_state(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """The adapter's tensors under the names PEFT saves (`base_model.model.<module>.lora_A.weight`)."""
    out = {}
    for name, value in state.items():
        match = _LORA_KEY.match(name)
        if match:
            out[f"{match['module']}.lora_{match['ab']}.weight"] = value
    return out


def adapter_config(model: torch.nn.Module, base_model_path: str) -> dict[str, Any]:
    """adapter_config.json as peft writes it, for this adapter."""
    config = model.peft_config[ADAPTER]  # type: ignore[union-attr,index]
    raw = config.to_dict()
    for key, value in list(raw.items()):
        if isinstance(value, set):
            raw[key] = sorted(value)
    raw["base_model_name_or_path"] = base_model_path
    raw["task_type"] = raw.get("task_type") or "CAUSAL_LM"
    raw["inference_mode"] = True
    return raw
