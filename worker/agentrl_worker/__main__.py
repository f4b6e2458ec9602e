"""The persistent training worker: `torchrun --nproc_per_node N -m agentrl_worker --socket PATH`, or for one rank on one
node `python -m agentrl_worker --socket PATH` (a world of one, without torchrun).

The CLI listens on the Unix socket PATH; rank 0 connects to it and reads one JSON command per line, broadcasts it to
every rank, runs it everywhere, and writes one JSON reply per line. When the socket closes (the CLI exited or died),
rank 0 broadcasts a shutdown, so every rank exits. The protocol is documented in docs/worker-protocol.md.
"""

from __future__ import annotations

from .warm_start import hand_off

hand_off(__name__)  # a warm start, when AGENTRL_WARM_START names a server (its module says how); before the imports below

import argparse
import datetime
import json
import os
import socket
import sys
import threading
import time
import traceback
from typing import Any

import torch
import torch.distributed as dist

from .protocol import SCHEMA, ConfigError, ProtocolError, check_request, outgoing_problems

PROTOCOL_VERSION = SCHEMA["protocol"]


class Channel:
    """Rank 0's end of the JSON-lines socket."""

    def __init__(self, path: str, connect_timeout: float = 60.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        deadline = time.monotonic() + connect_timeout
        while True:
            try:
                self.sock.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.reader = self.sock.makefile("r", encoding="utf-8")

    def receive(self) -> dict[str, Any] | None:
        """The next valid command, or None when the CLI closed its end. Invalid lines are answered here, on rank 0,
        and never reach the other ranks."""
        while True:
            try:
                line = self.reader.readline()
            except (ConnectionError, OSError):
                return None
            if not line:
                return None
            if line.strip():
                message = self._command(line)
                if message is not None:
                    return message

    def _command(self, line: str) -> dict[str, Any] | None:
        """The line's command, or None once the line has been answered as one the worker cannot act on."""
        try:
            message = json.loads(line)
        except json.JSONDecodeError as err:
            self.send(_failure(None, "ProtocolError", f"bad JSON: {err}"))
            return None
        try:
            check_request(message)
        except ProtocolError as err:
            self.send(_failure(None, "ProtocolError", str(err)))
            return None
        except ConfigError as err:  # the schema refused it; the message names the field
            request_id = message.get("id")
            self.send(_failure(request_id if type(request_id) is int else None, "InputError", str(err)))
            return None
        return message

    def send(self, message: dict[str, Any], cmd: str | None = None) -> None:
        """Sends a reply to `cmd` (or an event), checked against the protocol first: one that breaks it would fail on
        the CLI's side with less to go on, so it goes out as a ProtocolError naming the field instead."""
        found = outgoing_problems(message, cmd)
        if found:
            what = f"{cmd} reply" if cmd else "message"
            message = _failure(message.get("id"), "ProtocolError", f"the worker's {what} breaks the protocol: {'; '.join(found)}")
        try:
            self.sock.sendall((json.dumps(message) + "\n").encode("utf-8"))
        except (ConnectionError, OSError):
            pass  # the CLI went away; the next receive() returns None and we shut down


def _failure(request_id: Any, kind: str, text: str) -> dict[str, Any]:
    return {"id": request_id, "ok": False, "error": {"type": kind, "message": text}}


def _broadcast(message: dict[str, Any] | None) -> dict[str, Any]:
    box = [message]
    dist.broadcast_object_list(box, src=0)
    return box[0]  # type: ignore[return-value]


def _dispatch(state: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    """Runs a command the protocol schema has accepted (Channel.receive), so its fields are there and well typed."""
    from .config import WorkerConfig

    cmd = message["cmd"]
    if cmd == "init":
        if state.get("trainer") is not None:
            raise ConfigError("init: the worker is already initialised")
        from .trainer import Trainer

        config = WorkerConfig.from_dict(message["config"])
        started = time.monotonic()
        trainer = Trainer(config)
        state["trainer"] = trainer
        return {"world_size": trainer.world, "device": str(trainer.device), "fsdp": trainer.fsdp, "load_s": time.monotonic() - started}
    trainer = state.get("trainer")
    if trainer is None:
        raise ConfigError(f"{cmd}: send init first")
    if cmd == "compute_log_probs":
        return trainer.compute_log_probs(message["batch"], message["out"])
    if cmd == "update":
        return trainer.update(message["batch"], message.get("log_probs"))
    if cmd == "save_weights":
        return trainer.save_weights(message["dir"], message.get("dtype"))
    if cmd == "save_adapter":
        return trainer.save_adapter(message["dir"])
    if cmd == "save_checkpoint":
        return trainer.save_checkpoint(message["dir"])
    if cmd == "load_checkpoint":
        return trainer.load_checkpoint(message["dir"])
    if cmd == "fingerprint":
        return trainer.fingerprint()
    if cmd == "sft_step":
        return trainer.sft_step(message["batch"])
    if cmd == "sft_eval":
        return trainer.sft_eval(message["batch"])
    if cmd == "init_weights_group":
        fields = ("master_address", "master_port", "world_size", "group_name", "backend", "timeout_s")
        return trainer.init_weights_group(*(message[f] for f in fields))
    if cmd == "plan_weight_buckets":
        return trainer.plan_weight_buckets(message["bucket_bytes"], message.get("dtype"))
    if cmd == "broadcast_weights":
        return trainer.broadcast_weights(message["names"], message.get("dtype"))
    if cmd == "serialize_weights":
        return trainer.serialize_weights(message["names"], message.get("dtype"))
    raise RuntimeError(f"the protocol has a command {cmd!r} the worker does not serve")


def _error(err: BaseException) -> dict[str, Any]:
    return {
        "type": "InputError" if isinstance(err, ConfigError) else type(err).__name__,
        "message": str(err),
        "traceback": "".join(traceback.format_exception(err))[-4000:],
    }


def serve(socket_path: str) -> None:
    rank = dist.get_rank()
    channel = Channel(socket_path) if rank == 0 else None
    if channel:
        channel.send({"event": "ready", "protocol": PROTOCOL_VERSION, "world_size": dist.get_world_size(), "pid": os.getpid()})
    state: dict[str, Any] = {}
    while True:
        message = _broadcast(channel.receive() if channel else None)
        if message is None:
            message = {"cmd": "shutdown", "id": None, "reason": "socket closed"}
        if message["cmd"] == "shutdown":
            if channel:
                channel.send({"id": message.get("id"), "ok": True}, "shutdown")
            return
        error = None
        try:
            result = _dispatch(state, message)
        except Exception as err:  # every failure becomes a structured reply; the worker keeps serving
            error = _error(err)
            result = {}
        # Agree on the outcome, so that a failure on any rank is reported rather than hidden.
        outcomes: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(outcomes, error)
        first_error = next((e for e in outcomes if e is not None), None)
        if channel:
            if first_error is None:
                channel.send({"id": message.get("id"), "ok": True, **result}, message["cmd"])
            else:
                channel.send({"id": message.get("id"), "ok": False, "error": first_error})


def watch_parent(pid: int, interval_s: float = 1.0) -> None:
    """Ends this rank once the CLI that launched it is gone.

    A CLI killed with SIGKILL cannot close its socket: without this, rank 0 would keep retrying the connection (or
    finish a long update) and hold its memory and GPU for minutes.
    """

    def loop() -> None:
        while True:
            time.sleep(interval_s)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                print(f"agentrl worker: the CLI (pid {pid}) is gone; exiting", file=sys.stderr, flush=True)
                os._exit(1)
            except PermissionError:
                pass  # alive, owned by someone else: not ours to judge

    threading.Thread(target=loop, name="agentrl-parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="[torchrun ...] python -m agentrl_worker")
    parser.add_argument("--socket", required=True, help="Unix socket the CLI listens on")
    parser.add_argument("--idle-timeout-h", type=float, default=24.0, help="collective timeout while waiting for commands")
    parser.add_argument("--parent-pid", type=int, default=None, help="exit when this process (the CLI) is gone")
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        watch_parent(args.parent_pid)
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    # Ranks other than 0 wait in a broadcast while the CLI does rollouts, so the collective timeout must be long.
    timeout = datetime.timedelta(hours=args.idle_timeout_h)
    if "RANK" in os.environ:  # started by torchrun (or another launcher that sets RANK, WORLD_SIZE, MASTER_ADDR/PORT)
        dist.init_process_group(backend, timeout=timeout)
    else:
        # Started alone (the CLI does this for one rank on one node): a world of one, whose store lives in this
        # process. torchrun would add nothing but its own start-up, about 1 s and a second torch import.
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    try:
        serve(args.socket)
    finally:
        dist.destroy_process_group()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
    # Skip the interpreter's teardown: after a clean shutdown, C++ destructors of torch's thread pools occasionally
    # abort ("terminate called without an active exception", SIGABRT) and turn a clean exit into a failed rank with a
    # traceback in the CLI's log. Everything the worker owes is already written; only the streams need flushing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
