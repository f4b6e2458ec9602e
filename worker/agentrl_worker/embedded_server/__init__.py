"""The embedded inference server (`agentrl serve --engine embedded`): a Hugging Face model served behind SGLang's
native HTTP API (docs/embedded-engine.md).

Run it with `python -m agentrl_worker.embedded_server --model DIR --port P`; from Python, `load_model` + `start_server`.
"""

from .model import LoadedModel, load_model
from .server import EmbeddedServer, ServerConfig, start_server

__all__ = ["EmbeddedServer", "LoadedModel", "ServerConfig", "load_model", "start_server"]
