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

    # The command line, as users run it: a process of its own, so the bytes must not depend on the process either.
    # Hidden 16 (one head of make_tiny's head_dim 16): the 151,936-row embedding and head make the cost, and nothing
    # checked here depends on the width.
    # It runs while this process makes the same folder and another seed's.
    cli = subprocess.Popen(
        [sys.executable, "-m", "agentrl_worker.make_tiny", "--tokenizer", str(TOKENIZER_DIR), "--layers", "1",
         "--hidden", "16", "--out", str(tmp_path / "a"), "--seed", "5"],
        cwd=WORKER_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        make_tiny(TOKENIZER_DIR, 1, 16, tmp_path / "b", seed=5)
        make_tiny(TOKENIZER_DIR, 1, 16, tmp_path / "c", seed=6)
        output, _ = cli.communicate(timeout=240)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == 0, output.decode(errors="replace")
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    assert digest(tmp_path / "a") != digest(tmp_path / "c")
    names = {p.name for p in (tmp_path / "a").iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names

    model = AutoModelForCausalLM.from_pretrained(tmp_path / "a")
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "a")
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert model.config.num_hidden_layers == 1 and model.config.hidden_size == 16
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "2+2?"}], add_generation_prompt=True, return_tensors="pt")
    ids = ids["input_ids"] if not isinstance(ids, torch.Tensor) else ids
    # Every id the tokenizer can produce has an embedding row.
    assert model.config.vocab_size >= len(tokenizer)
    assert model(input_ids=ids).logits.shape == (1, ids.shape[1], model.config.vocab_size)
