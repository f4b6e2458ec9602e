"""Writes a seeded, random-init Qwen-architecture model folder for tests and CPU demos.

    python -m agentrl_worker.make_tiny --tokenizer DIR --layers L --hidden H --out DIR [--seed S] [--arch qwen3|qwen2]

The folder holds config.json, generation_config.json, model.safetensors and the tokenizer files copied from DIR, so
transformers (and SGLang) load it like any Hugging Face checkpoint. The same arguments always give the same bytes.
"""

from __future__ import annotations

from .warm_start import hand_off

hand_off(__name__)  # a warm start, when AGENTRL_WARM_START names a server (its module says how); before the imports below

import argparse
import json
import shutil
from pathlib import Path

import torch

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
)


def _vocab_size(tokenizer_dir: Path) -> tuple[int, int | None, int | None]:
    """The embedding size covering every token id, plus the eos and pad ids from the tokenizer files."""
    data = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    ids = list(data["model"]["vocab"].values()) + [t["id"] for t in data.get("added_tokens", [])]
    by_content = {t["content"]: t["id"] for t in data.get("added_tokens", [])}
    config_path = tokenizer_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text()) if config_path.exists() else {}

    def token_id(key: str) -> int | None:
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        return by_content.get(value) if isinstance(value, str) else None

    # Round up to a multiple of 64 as released Qwen checkpoints do (their embeddings are larger than the vocabulary).
    size = (max(ids) + 1 + 63) // 64 * 64
    return size, token_id("eos_token"), token_id("pad_token")


def make_tiny(
    tokenizer_dir: str | Path, layers: int, hidden: int, out: str | Path, seed: int = 0, arch: str = "qwen3",
    heads: int | None = None, kv_heads: int | None = None, intermediate: int | None = None, tie: bool = False,
) -> Path:
    """Creates the folder `out` and returns its path. `heads`, `kv_heads`, `intermediate` and `tie` default to a
    tiny model's; set, they give a released model's shapes (Qwen2.5-0.5B: hidden 896, 24 layers, 14 heads, 2 KV heads,
    intermediate 4864, tied embeddings), as bench/weight-sync.py does."""
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    tokenizer_dir, out = Path(tokenizer_dir), Path(out)
    vocab_size, eos_id, pad_id = _vocab_size(tokenizer_dir)
    heads = heads or max(1, hidden // 16)
    common = dict(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=intermediate or hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads or max(1, heads // 2),
        max_position_embeddings=4096,
        tie_word_embeddings=tie,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        bos_token_id=None,
        torch_dtype="float32",
    )
    if arch == "qwen3":
        config = Qwen3Config(head_dim=16, **common)
        model_cls = Qwen3ForCausalLM
    elif arch == "qwen2":
        config = Qwen2Config(**common)
        model_cls = Qwen2ForCausalLM
    else:
        raise ValueError(f"unknown --arch {arch!r}; expected qwen3 or qwen2")
    torch.manual_seed(seed)
    model = model_cls(config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id).save_pretrained(out)
    for name in TOKENIZER_FILES:
        if (tokenizer_dir / name).exists():
            shutil.copyfile(tokenizer_dir / name, out / name)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agentrl_worker.make_tiny", description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", required=True, help="folder with tokenizer.json (and tokenizer_config.json)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arch", choices=("qwen3", "qwen2"), default="qwen3")
    args = parser.parse_args(argv)
    path = make_tiny(args.tokenizer, args.layers, args.hidden, args.out, args.seed, args.arch)
    print(path)


if __name__ == "__main__":
    main()
