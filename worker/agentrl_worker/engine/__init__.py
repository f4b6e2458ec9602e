"""The embedded inference engine: a Hugging Face model served behind SGLang's native HTTP API (docs/embedded-engine.md).

Run it with `python -m agentrl_worker.engine --model DIR --port P`; from Python, `load_model` + `start_engine`.
"""

from .model import LoadedModel, load_model
from .server import EngineServer, ServerConfig, start_engine

__all__ = ["EngineServer", "LoadedModel", "ServerConfig", "load_model", "start_engine"]
