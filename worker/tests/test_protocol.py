"""The worker's side of the protocol schema (agentrl_worker/protocol.py and protocol.schema.json, generated from the
CLI's zod schemas): its verdicts on the shared table of examples, its agreement with the code that implements each
setting, and rank 0 refusing an invalid command before any other rank sees it."""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
from pathlib import Path

import pytest

from agentrl_worker import algos, lr_schedule
from agentrl_worker.config import WorkerConfig
from agentrl_worker.protocol import COMMANDS, SCHEMA, ConfigError, check_init_config, check_request
from agentrl_worker.validate import verdict

CASES = json.loads((Path(__file__).resolve().parents[2] / "test" / "fixtures" / "worker-protocol-cases.json").read_text())
CONFIG = SCHEMA["requests"]["init"]["properties"]["config"]


@pytest.mark.parametrize("case", CASES, ids=[c["note"] for c in CASES])
def test_the_shared_examples(case):
    error = verdict(case)
    if case["valid"]:
        assert error is None
    else:
        assert error is not None and case["field"] in error


def test_every_schema_in_the_file_is_a_valid_draft_2020_12_schema():
    from jsonschema import Draft202012Validator

    schemas = [*SCHEMA["requests"].values(), *SCHEMA["replies"].values(), SCHEMA["error_reply"], *SCHEMA["events"].values()]
    for schema in schemas:
        Draft202012Validator.check_schema(schema)
    assert set(SCHEMA["requests"]) == set(SCHEMA["replies"]) == set(COMMANDS)


def test_the_schema_matches_the_settings_the_worker_implements():
    assert set(CONFIG["properties"]) == {f.name for f in dataclasses.fields(WorkerConfig)}
    assert CONFIG["required"] == ["model_path"]
    choices = {name: tuple(spec["enum"]) for name, spec in CONFIG["properties"].items() if "enum" in spec}
    assert choices["loss_agg_mode"] == algos.LOSS_AGG_MODES
    assert choices["kl_loss_type"] == algos.KL_KINDS
    assert choices["lr_scheduler_type"] == lr_schedule.SCHEDULER_TYPES


def test_errors_name_every_bad_field_at_once():
    with pytest.raises(ConfigError) as caught:
        check_init_config({"model_path": "m", "lr": "big", "ppo_epochs": 0, "betas": [0.9, 1.5, 0.1]})
    message = str(caught.value)
    for part in ("config.lr must be float, got str", "config.ppo_epochs must be >= 1, got 0", "config.betas"):
        assert part in message
    assert message.count("config.betas must be a list of 2") == 1


def test_an_integer_is_not_a_float_nor_a_bool():
    # JSON Schema calls 2.0 an integer; the worker would then hand a float to range().
    for value in (2.0, True):
        with pytest.raises(ConfigError, match="ppo_epochs must be int"):
            check_request({"id": 1, "cmd": "init", "config": {"model_path": "m", "ppo_epochs": value}})
    with pytest.raises(ConfigError, match="must be a finite number"):
        check_request({"id": 1, "cmd": "init", "config": {"model_path": "m", "lr": float("nan")}})


class _Cli:
    """The CLI's end of the socket, for one Channel."""

    def __init__(self, tmp_path: Path) -> None:
        path = str(tmp_path / "s.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(1)
        self.path = path

    def accept(self) -> None:
        self.conn, _ = self.server.accept()
        self.reader = self.conn.makefile("r", encoding="utf-8")

    def send(self, line: str) -> None:
        self.conn.sendall((line + "\n").encode())

    def reply(self) -> dict:
        return json.loads(self.reader.readline())


def test_rank0_answers_an_invalid_command_itself_and_returns_the_next_valid_one(tmp_path):
    from agentrl_worker.__main__ import Channel

    cli = _Cli(tmp_path)
    accepted = threading.Thread(target=cli.accept)
    accepted.start()
    channel = Channel(cli.path, connect_timeout=10)
    accepted.join()
    cli.send("not json")
    cli.send(json.dumps({"id": 4, "cmd": "init", "config": {"model_path": "m", "temperature": 0}}))
    cli.send(json.dumps({"id": 5, "cmd": "update", "batch": "/b", "epochs": 2}))
    cli.send(json.dumps({"id": 6, "cmd": "fingerprint"}))
    assert channel.receive() == {"id": 6, "cmd": "fingerprint"}
    garbled, bad_init, bad_update = cli.reply(), cli.reply(), cli.reply()
    assert garbled["id"] is None and garbled["error"]["type"] == "ProtocolError"
    assert bad_init["id"] == 4 and bad_init["error"] == {"type": "InputError", "message": "init: config.temperature must be > 0, got 0"}
    assert bad_update["id"] == 5 and bad_update["error"]["message"] == "update: unknown field(s) epochs"

    # A reply that breaks the protocol is a worker bug: it goes out as a ProtocolError naming the field.
    channel.send({"id": 6, "ok": True, "params": "a", "optimizer": "b", "step": "1"}, "fingerprint")
    broken = cli.reply()
    assert broken["id"] == 6 and broken["ok"] is False and broken["error"]["type"] == "ProtocolError"
    assert "fingerprint reply breaks the protocol: step must be int, got str" in broken["error"]["message"]
    channel.sock.close()
    cli.conn.close()
    cli.server.close()


def test_every_command_but_init_and_shutdown_reaches_the_trainer():
    from agentrl_worker.__main__ import _dispatch

    class Trainer:
        def __getattr__(self, name: str):
            return lambda *args: {"called": name, "args": args}

    examples = {c["message"]["cmd"]: c["message"] for c in CASES if c["kind"] == "request" and c["valid"] and isinstance(c["message"], dict)}
    for cmd in COMMANDS:
        if cmd in ("init", "shutdown"):
            continue
        assert _dispatch({"trainer": Trainer()}, examples[cmd])["called"] == cmd
