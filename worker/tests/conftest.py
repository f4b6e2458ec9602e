"""Fixtures that several test modules use, built once per pytest session instead of once per module."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> tuple[Path, Path]:
    """The embedded engine's test models (test_embedded_server.py, test_prefix_cache.py): two checkpoints of the same
    architecture with different random weights (for the weight-update test), sharpened (test_embedded_server._sharpen).
    Nothing writes to them."""
    from agentrl_worker.make_tiny import make_tiny
    from test_embedded_server import TOKENIZER, _sharpen

    base = tmp_path_factory.mktemp("engine-models")
    a = make_tiny(TOKENIZER, layers=2, hidden=64, out=base / "a", seed=0, arch="qwen2")
    b = make_tiny(TOKENIZER, layers=2, hidden=64, out=base / "b", seed=1, arch="qwen2")
    return _sharpen(a), _sharpen(b)


@pytest.fixture(scope="session")
def update_gradient_files(tmp_path_factory) -> dict:
    """test_update_gradient.py's tiny model, batch and log-probs (build_files), for its `env` fixture, which
    test_lora.py and test_ref_model.py use too."""
    from test_update_gradient import build_files

    return build_files(tmp_path_factory.mktemp("update-gradient-files"))
