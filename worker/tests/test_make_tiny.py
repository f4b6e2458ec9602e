"""make_tiny writes a loadable, seeded, reproducible Qwen3 folder."""

import hashlib
import subprocess
import sys

import pytest
import torch

from agentrl_worker.make_tiny import make_tiny

from worker_harness import TOKENIZER_DIR, WORKER_ROOT

pytestmark = pytest.mark.slow


def digest(path):
    return hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()


def test_make_tiny_is_reproducible_and_loads(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # The command line, as users run it.
    subprocess.run(
        [sys.executable, "-m", "agentrl_worker.make_tiny", "--tokenizer", str(TOKENIZER_DIR), "--layers", "1",
         "--hidden", "32", "--out", str(tmp_path / "a"), "--seed", "5"],
        check=True, cwd=WORKER_ROOT, capture_output=True,
    )
    make_tiny(TOKENIZER_DIR, 1, 32, tmp_path / "b", seed=5)
    make_tiny(TOKENIZER_DIR, 1, 32, tmp_path / "c", seed=6)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert digest(tmp_path / "a") != digest(tmp_path / "c")
    names = {p.name for p in (tmp_path / "a").iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names

    model = AutoModelForCausalLM.from_pretrained(tmp_path / "a")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "a")
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert model.config.num_hidden_layers == 1 and model.config.hidden_size == 32
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "2+2?"}], add_generation_prompt=True, return_tensors="pt")
    ids = ids["input_ids"] if not isinstance(ids, torch.Tensor) else ids
    # Every id the tokenizer can produce has an embedding row.
    assert model.config.vocab_size >= len(tokenizer)
    assert model(input_ids=ids).logits.shape == (1, ids.shape[1], model.config.vocab_size)
