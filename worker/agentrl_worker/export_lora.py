"""`python -m agentrl_worker.export_lora --adapter runs/NAME/lora/STEP --out DIR`: a LoRA run's adapter merged into
its base model, written as a Hugging Face folder (config, tokenizer, model.safetensors) that transformers, SGLang and
`actor_rollout_ref.model.path` load like any model.

The adapter folder is what the worker's `save_adapter` writes each sync (runs/NAME/lora/STEP, the adapter the engine
served after step STEP); the base model is the adapter's `base_model_name_or_path` unless --base names another. Each
adapted weight becomes W + B·A·(alpha/r), computed as the worker computes it (`lora.merge`: float32, then the base's
dtype), so the folder equals what the worker's `save_weights` writes for the same adapter.
"""

from __future__ import annotations

from .warm_start import hand_off

hand_off(__name__)  # a warm start, when AGENTRL_WARM_START names a server (its module says how); before the imports below

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from . import lora
from .embedded_server.model import read_safetensors_dir

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def export(adapter_dir: str, out_dir: str, base: str | None = None, dtype: str | None = None) -> Path:
    adapter = Path(adapter_dir)
    config = json.loads((adapter / "adapter_config.json").read_text())
    base_dir = Path(base or config["base_model_name_or_path"])
    rank, alpha = int(config["r"]), float(config.get("lora_alpha", config["r"]))
    scale = alpha / (rank ** 0.5) if config.get("use_rslora") else alpha / rank
    state = read_safetensors_dir(str(base_dir))
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in load_file(str(adapter / "adapter_model.safetensors")).items():
        module, _, rest = key.removeprefix(lora.PEFT_PREFIX).rpartition(".lora_")
        pairs.setdefault(module, {})[rest[0]] = tensor
    for module, pair in pairs.items():
        name = f"{module}.weight"
        if name not in state or set(pair) != {"A", "B"}:
            raise SystemExit(f"export_lora: the adapter adapts {module}, which {base_dir} has no weight for")
        state[name] = lora.merge(state[name], pair["A"], pair["B"], scale)
    if dtype is not None:
        target = getattr(torch, dtype)
        state = {k: v.to(target) for k, v in state.items()}
    out = Path(out_dir)
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for item in base_dir.iterdir():
        if item.is_file() and not item.name.endswith(WEIGHT_SUFFIXES) and not item.name.endswith(".index.json"):
            shutil.copyfile(item, tmp / item.name)
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl_worker.export_lora", description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter", required=True, help="a PEFT adapter folder: runs/NAME/lora/STEP")
    parser.add_argument("--out", required=True, help="the merged model's folder (replaced)")
    parser.add_argument("--base", default=None, help="the base model folder (default: the adapter's base_model_name_or_path)")
    parser.add_argument("--dtype", default=None, choices=["float32", "bfloat16", "float16"], help="default: the base's own")
    args = parser.parse_args(argv)
    out = export(args.adapter, args.out, args.base, args.dtype)
    print(f"merged model written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
