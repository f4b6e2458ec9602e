"""The embedded server's HTTP front: the subset of SGLang's native API that agentrl uses (docs/embedded-engine.md).

A ThreadingHTTPServer gives every connection a thread; /generate threads hand their generations to the one
scheduler thread and block until they finish, so concurrent requests share forward passes.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import urlsplit

from .lora import LoraAdapters
from .model import LoadedModel
from .protocol import generation_response, parse_generate
from .sampling import RequestError, SamplingParams
from .scheduler import Generation, Scheduler
from .weight_updates import WeightEndpoints

VERSION = "agentrl-embedded-0.1.0"
HEALTH_GENERATE_TIMEOUT_S = 20.0
# src/serve/server-process.ts reads this header; AGENTRL_LAUNCH_ID (read in __main__) sets its value.
LAUNCH_ID_HEADER = "X-Agentrl-Launch-Id"
log = logging.getLogger("agentrl_worker.embedded_server")


class _Server(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: a burst of 64 rollout connections would be reset.
    request_queue_size = 1024
    daemon_threads = True


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 30000
    api_key: str | None = None
    max_batch: int = 64
    # Seeds the generations that carry no sampling_seed (SGLang's --random-seed); None: a fresh seed per start.
    random_seed: int | None = None
    # SGLang's --enable-priority-scheduling: waiting requests start by their `priority`, higher first.
    enable_priority_scheduling: bool = False
    # The prefix cache's budget (prefix_cache.py); 0 turns it off (SGLang's --disable-radix-cache).
    prefix_cache_bytes: int = 512 << 20
    # A token from the managing parent (agentrl serve), echoed in every response's X-Agentrl-Launch-Id header, so
    # the parent can tell this process's /health from another server's that already held the port.
    launch_id: str | None = None
    # SGLang's --enable-lora, --max-lora-rank, --lora-target-modules: LoRA adapters served per request (lora.py).
    enable_lora: bool = False
    max_lora_rank: int | None = None
    lora_target_modules: list[str] | None = None


# How often the HTTP loop looks for shutdown(): its own default, 0.5 s, is how long every stop of the engine waited
# (the CLI waits for the engine to exit at the end of each run).
SHUTDOWN_POLL_S = 0.05


class EmbeddedServer:
    """The scheduler plus the HTTP server around it; `start()` returns once the port is bound."""

    def __init__(self, loaded: LoadedModel, config: ServerConfig):
        self.loaded = loaded
        self.config = config
        adapters = (
            LoraAdapters(loaded.model, config.max_lora_rank, config.lora_target_modules) if config.enable_lora else None
        )
        self.scheduler = Scheduler(loaded, max_batch=config.max_batch, random_seed=config.random_seed,
                                   priority_scheduling=config.enable_priority_scheduling,
                                   prefix_cache_bytes=config.prefix_cache_bytes, adapters=adapters)
        self.weights = WeightEndpoints(loaded, self.scheduler)
        self.started_at = time.time()
        self.httpd = _Server((config.host, config.port), _handler_for(self))
        self._serve_thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, name="embedded-server-http", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        host = self.config.host if self.config.host not in ("0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.port}"

    def start(self) -> "EmbeddedServer":
        self.scheduler.start()
        self._serve_thread.start()
        return self

    def serve_forever(self) -> None:
        self.scheduler.start()
        self.httpd.serve_forever(poll_interval=SHUTDOWN_POLL_S)

    def shutdown(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.scheduler.stop()

    # ---- endpoint bodies: each returns (status, JSON body or text) ----

    def generate(self, body: object) -> tuple[int, object]:
        request = parse_generate(body, self.loaded.context_length, self.loaded.vocab_size)
        adapters = self.scheduler.adapters
        for gen in request.generations:
            if gen.lora is not None and adapters is None:
                raise RequestError("lora_path needs a server started with --enable-lora.")
            if gen.lora is not None and gen.lora not in adapters.adapters:  # type: ignore[union-attr]
                raise RequestError(f"LoRA adapter {gen.lora!r} is not loaded; load it with /load_lora_adapter first.")
        self.scheduler.submit(request.generations)
        for gen in request.generations:
            gen.done.wait()
        answers = [generation_response(gen, self.loaded.tokenizer) for gen in request.generations]
        return 200, answers if request.batched else answers[0]

    def health_generate(self) -> tuple[int, object]:
        gen = Generation(rid=f"HEALTH_CHECK_{time.time_ns()}", input_ids=[0], seed=0, return_logprob=False,
                         params=SamplingParams(max_new_tokens=1, temperature=0.0))
        self.scheduler.submit([gen])
        if gen.done.wait(HEALTH_GENERATE_TIMEOUT_S) and gen.finish_reason and gen.finish_reason["type"] != "abort":
            return 200, ""
        self.scheduler.abort(gen.rid, abort_all=False)
        return 503, ""

    def model_info(self) -> dict:
        return {
            "model_path": self.scheduler.served_model_name,
            "tokenizer_path": self.loaded.model_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": self.scheduler.weight_version,
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": self.loaded.model_type,
            "architectures": self.loaded.architectures,
        }

    def server_info(self) -> dict:
        load = self.scheduler.load()
        return {
            "model_path": self.loaded.model_path,
            "tokenizer_path": self.loaded.model_path,
            "served_model_name": self.scheduler.served_model_name,
            "host": self.config.host,
            "port": self.port,
            "device": str(self.loaded.device),
            "dtype": str(self.loaded.dtype).removeprefix("torch."),
            "context_length": self.loaded.context_length,
            "max_running_requests": self.config.max_batch,
            "random_seed": self.config.random_seed,
            "enable_priority_scheduling": self.config.enable_priority_scheduling,
            "enable_lora": self.config.enable_lora,
            "max_lora_rank": self.config.max_lora_rank,
            "lora_target_modules": self.config.lora_target_modules,
            "skip_tokenizer_init": False,
            "tool_call_parser": None,
            "weight_version": self.scheduler.weight_version,
            "max_total_num_tokens": self.loaded.context_length * self.config.max_batch,
            "internal_states": [{
                **load, "tokens_generated": self.scheduler.tokens_generated, "peak_running": self.scheduler.peak_running,
                "prefix_cache_hit_tokens": self.scheduler.prefix_cache.hits_tokens,
            }],
            "version": VERSION,
            "engine": "agentrl-embedded",
            "launch_id": self.config.launch_id,
        }

    def v1_models(self) -> dict:
        name = self.scheduler.served_model_name
        return {"object": "list", "data": [{
            "id": name, "object": "model", "created": int(self.started_at), "owned_by": "sglang", "root": name,
            "parent": None, "max_model_len": self.loaded.context_length,
        }]}

    def flush_cache(self) -> tuple[int, str]:
        if self.scheduler.is_idle():
            self.scheduler.prefix_cache.clear()
            return 200, "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n"
        return 400, "Cache not flushed: there are running or waiting requests.\n"

    def abort_request(self, body: object) -> tuple[int, str]:
        if not isinstance(body, dict):
            raise RequestError("The request body must be a JSON object.")
        rid, abort_all = body.get("rid") or "", bool(body.get("abort_all", False))
        if rid or abort_all:
            self.scheduler.abort(str(rid), abort_all)
        return 200, ""

    def pause_generation(self, body: object) -> tuple[int, dict]:
        mode = body.get("mode", "abort") if isinstance(body, dict) else None
        if mode not in ("abort", "retract", "in_place"):
            raise RequestError(f"mode must be abort, retract or in_place; got {mode!r}")
        # retract would move running generations back to the queue; here they stay in place, which resumes the same.
        self.scheduler.pause(abort_running=mode == "abort")
        return 200, {"message": "Generation paused successfully.", "status": "ok"}

    def continue_generation(self, _body: object) -> tuple[int, dict]:
        self.scheduler.resume()
        return 200, {"message": "Generation continued successfully.", "status": "ok"}


def _handler_for(server: EmbeddedServer) -> type[BaseHTTPRequestHandler]:
    def routes() -> dict[tuple[str, str], Callable[[object], tuple[int, object]]]:
        info = lambda _: (200, server.model_info())  # noqa: E731
        status = lambda _: (200, server.server_info())  # noqa: E731
        healthy = lambda _: (200 if server.scheduler.alive() else 503, "")  # noqa: E731
        table = {
            ("POST", "/generate"): server.generate,
            ("PUT", "/generate"): server.generate,
            ("GET", "/health"): healthy,
            ("GET", "/health_generate"): lambda _: server.health_generate(),
            ("GET", "/model_info"): info,
            ("GET", "/get_model_info"): info,
            ("GET", "/server_info"): status,
            ("GET", "/get_server_info"): status,
            ("GET", "/v1/models"): lambda _: (200, server.v1_models()),
            ("GET", "/flush_cache"): lambda _: server.flush_cache(),
            ("POST", "/flush_cache"): lambda _: server.flush_cache(),
            ("POST", "/abort_request"): server.abort_request,
            ("POST", "/update_weights_from_disk"): server.weights.update_weights_from_disk,
            ("POST", "/init_weights_update_group"): server.weights.init_weights_update_group,
            ("POST", "/update_weights_from_distributed"): server.weights.update_weights_from_distributed,
            ("POST", "/update_weight_version"): server.weights.update_weight_version,
            ("POST", "/load_lora_adapter"): server.weights.load_lora_adapter,
            ("POST", "/unload_lora_adapter"): server.weights.unload_lora_adapter,
            ("GET", "/get_weights_by_name"): server.weights.get_weights_by_name,
            ("POST", "/get_weights_by_name"): server.weights.get_weights_by_name,
            ("POST", "/pause_generation"): server.pause_generation,
            ("POST", "/continue_generation"): server.continue_generation,
            ("GET", "/get_load"): lambda _: (200, [{"dp_rank": 0, **server.scheduler.load()}]),
        }
        return table

    table = routes()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
            log.debug("%s %s", self.address_string(), format % args)

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        def do_PUT(self) -> None:
            self._dispatch("PUT")

        def _dispatch(self, method: str) -> None:
            path = urlsplit(self.path).path
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not self._authorized(path):
                return self._send(401, {"error": "Unauthorized"})
            route = table.get((method, path))
            if route is None:
                known = any(p == path for _, p in table)
                return self._send(405 if known else 404, {"detail": "Method Not Allowed" if known else "Not Found"})
            try:
                body = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError as error:
                return self._send(400, {"error": {"message": f"The request body is not valid JSON: {error}"}})
            try:
                status, answer = route(body)
            except RequestError as error:
                status, answer = 400, {"error": {"message": str(error)}}
            except Exception as error:  # noqa: BLE001 (a bug must answer 500, not drop the connection)
                log.exception("handler for %s failed", path)
                status, answer = 500, {"error": {"message": f"Internal error: {error}"}}
            self._send(status, answer)

        def _authorized(self, path: str) -> bool:
            key = server.config.api_key
            if not key or path.startswith("/health") or path.startswith("/metrics"):
                return True
            return hmac.compare_digest(self.headers.get("Authorization", ""), f"Bearer {key}")

        def _send(self, status: int, answer: object) -> None:
            if isinstance(answer, str):
                data, kind = answer.encode(), "text/plain; charset=utf-8"
            else:
                data, kind = json.dumps(answer).encode(), "application/json"
            try:
                self.send_response(status, HTTPStatus(status).phrase)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                if server.config.launch_id:
                    self.send_header(LAUNCH_ID_HEADER, server.config.launch_id)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client went away; nothing left to tell it

    return Handler


def start_server(loaded: LoadedModel, config: ServerConfig) -> EmbeddedServer:
    """Start the server on background threads (tests, benchmarks); port 0 picks a free port (see `.port`)."""
    return EmbeddedServer(loaded, config).start()
