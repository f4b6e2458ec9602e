"""The embedded inference server (`agentrl serve --engine embedded`): a Hugging Face model served behind SGLang's
native HTTP API (docs/embedded-engine.md).

Run it with `python -m agentrl_worker.embedded_server --model DIR --port P`; from Python, `load_model` + `start_server`.
"""

from __future__ import annotations

import importlib
from typing import Any

# Loaded on first use, so that `python -m agentrl_worker.embedded_server` reaches its warm-start hand-off
# (agentrl_worker/warm_start.py) before torch is imported.
_EXPORTS = {
    "LoadedModel": ".model", "load_model": ".model",
    "EmbeddedServer": ".server", "ServerConfig": ".server", "start_server": ".server",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
