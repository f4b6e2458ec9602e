"""`python -m agentrl_worker.embedded_server --model DIR --port P`: serve a model folder behind SGLang's native HTTP API."""

from __future__ import annotations

from ..warm_start import hand_off

hand_off(__name__)  # a warm start, when AGENTRL_WARM_START names a server (its module says how); before the imports below

import argparse
import logging
import os
import signal
import sys
import threading

import torch

from .model import load_model
from .server import EmbeddedServer, ServerConfig


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m agentrl_worker.embedded_server", description=__doc__)
    parser.add_argument("--model", required=True, help="Hugging Face model folder (config, safetensors, tokenizer)")
    parser.add_argument("--port", type=int, default=30000, help="port to listen on; 0 picks a free one (default 30000)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                        help="cpu, cuda or cuda:N (default: cuda when available)")
    parser.add_argument("--max-batch", type=int, default=64, help="most generations decoded together (default 64)")
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
                        help="auto: float32 on CPU, the checkpoint's dtype on GPU")
    parser.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY' (not on /health*)")
    parser.add_argument("--random-seed", type=int, default=None,
                        help="seed for requests that carry no sampling_seed (default: a fresh one per start)")
    parser.add_argument("--enable-priority-scheduling", action="store_true",
                        help="start waiting requests by their priority field, higher first (SGLang's flag)")
    parser.add_argument("--disable-radix-cache", action="store_true",
                        help="no prefix cache: every prompt prefills from its first token (SGLang's flag)")
    parser.add_argument("--prefix-cache-mb", type=int, default=512,
                        help="memory for the key/values of sequences already run, reused by prompts that start with "
                             "them (default 512)")
    parser.add_argument("--enable-lora", action="store_true",
                        help="serve LoRA adapters: /load_lora_adapter, /unload_lora_adapter, lora_path per request (SGLang's flag)")
    parser.add_argument("--max-lora-rank", type=int, default=None, help="refuse adapters of a higher rank")
    parser.add_argument("--lora-target-modules", nargs="+", default=None,
                        help="refuse adapters on other modules (q_proj v_proj ...; all-linear: any linear layer)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.max_batch < 1:
        print("--max-batch must be at least 1", file=sys.stderr)
        return 2
    try:
        loaded = load_model(args.model, device=args.device, dtype=args.dtype)
    except (OSError, ValueError) as error:
        print(f"cannot load model from {args.model}: {error}", file=sys.stderr)
        return 2
    server = EmbeddedServer(loaded, ServerConfig(host=args.host, port=args.port, api_key=args.api_key,
                                                 max_batch=args.max_batch, random_seed=args.random_seed,
                                                 enable_priority_scheduling=args.enable_priority_scheduling,
                                                 prefix_cache_bytes=0 if args.disable_radix_cache else args.prefix_cache_mb << 20,
                                                 # Set by agentrl serve, not by users: see ServerConfig.launch_id.
                                                 launch_id=os.environ.get("AGENTRL_LAUNCH_ID") or None,
                                                 enable_lora=args.enable_lora or bool(args.max_lora_rank or args.lora_target_modules),
                                                 max_lora_rank=args.max_lora_rank,
                                                 lora_target_modules=None if args.lora_target_modules in (None, ["all-linear"]) else args.lora_target_modules))
    # SIGTERM from a managing parent (agentrl serve) shuts down like Ctrl-C; shutdown() must run off the serve thread.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.httpd.shutdown, daemon=True).start())
    # The managing parent reads this line (and polls /health) to learn the URL when --port 0 was given.
    scheduling = ", priority scheduling" if args.enable_priority_scheduling else ""
    print(f"agentrl embedded engine serving {args.model} on {server.url} ({loaded.device}, {loaded.dtype}{scheduling})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        server.scheduler.stop()
    return 0


if __name__ == "__main__":
    code = main()
    # Skip the interpreter's teardown, as the training worker does: unloading torch and transformers took about 0.8 s
    # of CPU at every stop of the engine, after everything it owes is written; only the streams need flushing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
