"""Loading a Hugging Face model folder for the embedded engine, and swapping its weights (from disk or from tensors).

The engine serves decoder-only models with full attention on every layer (Qwen2/Qwen3/Llama families): its batched KV
cache (kv_batch.py) left-pads rows to one length, which a sliding-window cache layer would not allow.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class WeightLoadError(Exception):
    """A checkpoint that cannot replace the served weights (missing files, unknown or missing tensors, bad shapes)."""


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: PreTrainedTokenizerBase
    model_path: str
    model_type: str
    architectures: list[str]
    context_length: int
    vocab_size: int
    # Token ids that end a generation unless the request sets ignore_eos (config, generation_config and tokenizer EOS).
    eos_token_ids: frozenset[int]
    device: torch.device
    dtype: torch.dtype


def resolve_dtype(name: str, device: torch.device, config_dtype: torch.dtype | None) -> torch.dtype:
    """`auto` means fp32 on CPU (exact logprobs, and CPU half precision is slow) and the checkpoint's dtype on GPU."""
    if name != "auto":
        if name not in DTYPES:
            raise ValueError(f"--dtype must be one of auto, {', '.join(DTYPES)}; got {name!r}")
        return DTYPES[name]
    if device.type == "cpu":
        return torch.float32
    return config_dtype if config_dtype in DTYPES.values() else torch.bfloat16


def load_model(model_path: str, device: str = "cpu", dtype: str = "auto") -> LoadedModel:
    torch_device = torch.device(device)
    config = AutoConfig.from_pretrained(model_path)
    layer_types = getattr(config, "layer_types", None) or []
    if any(t != "full_attention" for t in layer_types):
        raise ValueError(f"{model_path}: the embedded engine needs full attention on every layer; got {layer_types}")
    torch_dtype = resolve_dtype(dtype, torch_device, getattr(config, "dtype", None))
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch_dtype, attn_implementation="sdpa")
    model.to(torch_device).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        model_path=model_path,
        model_type=config.model_type,
        architectures=list(getattr(config, "architectures", None) or []),
        context_length=int(config.max_position_embeddings),
        vocab_size=int(config.vocab_size),
        eos_token_ids=frozenset(_eos_ids(model_path, config, tokenizer)),
        device=torch_device,
        dtype=torch_dtype,
    )


def _eos_ids(model_path: str, config, tokenizer: PreTrainedTokenizerBase) -> set[int]:
    ids: set[int] = set()

    def add(value) -> None:
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list):
            ids.update(v for v in value if isinstance(v, int))

    add(getattr(config, "eos_token_id", None))
    generation_config = Path(model_path) / "generation_config.json"
    if generation_config.is_file():
        add(json.loads(generation_config.read_text()).get("eos_token_id"))
    add(tokenizer.eos_token_id)
    return ids


def read_safetensors_dir(path: str) -> dict[str, torch.Tensor]:
    """All tensors of a checkpoint folder: one model.safetensors, or shards (listed by an index file or not)."""
    folder = Path(path)
    if folder.is_file() and folder.suffix == ".safetensors":
        return load_file(str(folder))
    if not folder.is_dir():
        raise WeightLoadError(f"{path}: no such checkpoint folder")
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        shards = sorted(p.name for p in folder.glob("*.safetensors"))
    if not shards:
        raise WeightLoadError(f"{path}: no .safetensors files")
    tensors: dict[str, torch.Tensor] = {}
    for shard in shards:
        tensors.update(load_file(str(folder / shard)))
    return tensors


def load_weights_from_disk(loaded: LoadedModel, path: str) -> int:
    """Copy a checkpoint's tensors into the served model (copy_weights); returns how many were loaded.

    The checkpoint must cover every parameter, except an output head tied to the input embeddings (save_pretrained
    omits it).
    """
    return copy_weights(loaded, read_safetensors_dir(path), path, complete=True)


def copy_weights(loaded: LoadedModel, tensors: dict[str, torch.Tensor], source: str, complete: bool) -> int:
    """Copy `tensors` into the served model in place, cast to its dtype; returns how many were copied.

    Every tensor must name a model parameter or buffer with the same shape; with `complete`, every parameter must be
    there too (a tied output head may be missing). Nothing is copied unless all checks pass, so bad input leaves the
    served weights as they were.
    """
    state = loaded.model.state_dict()
    unknown = sorted(set(tensors) - set(state))
    if unknown:
        raise WeightLoadError(f"{source}: tensors not in the served model: {', '.join(unknown[:5])}")
    if complete:
        tied = bool(getattr(loaded.model.config, "tie_word_embeddings", False))
        parameters = {name for name, _ in loaded.model.named_parameters(remove_duplicate=False)}
        missing = sorted(k for k in parameters if k not in tensors and not (tied and k == "lm_head.weight"))
        if missing:
            raise WeightLoadError(f"{source}: checkpoint lacks {len(missing)} parameters, e.g. {', '.join(missing[:5])}")
    for name, tensor in tensors.items():
        if tuple(tensor.shape) != tuple(state[name].shape):
            raise WeightLoadError(
                f"{source}: {name} has shape {tuple(tensor.shape)}, the served model has {tuple(state[name].shape)}"
            )
    with torch.no_grad():
        for name, tensor in tensors.items():
            state[name].copy_(tensor.to(device=state[name].device, dtype=state[name].dtype))
    return len(tensors)
