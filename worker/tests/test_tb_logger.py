"""agentrl_worker.tb_logger turns metrics JSON lines into TensorBoard scalars at their step.

The logger's `main` runs in this process: as its own process (`python -m agentrl_worker.tb_logger`, which the CLI
starts) it would import torch again, about 2.5 s of CPU a test; test/tensorboard.test.ts starts it as the CLI does."""

import io
import json
import sys

from agentrl_worker import tb_logger


def _log(tmp_path, lines, *extra_args, monkeypatch):
    """Runs the logger on metrics records, as the CLI feeds them on stdin, and returns its exit code."""
    monkeypatch.setattr(sys, "argv", ["tb_logger", str(tmp_path), *extra_args])
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(json.dumps(line) + "\n" for line in lines)))
    return tb_logger.main()


def test_writes_numeric_metrics_at_their_step(tmp_path, monkeypatch):
    lines = [
        {"step": 1, "time": 1.5, "critic/rewards/mean": 0.25, "actor/pg_loss": -0.1, "note": "text is skipped"},
        {"step": 2, "time": 2.5, "critic/rewards/mean": 0.75},
    ]
    assert _log(tmp_path, lines, monkeypatch=monkeypatch) == 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path))
    events.Reload()
    rewards = [(e.step, round(e.value, 6)) for e in events.Scalars("critic/rewards/mean")]
    assert rewards == [(1, 0.25), (2, 0.75)]
    assert [e.step for e in events.Scalars("actor/pg_loss")] == [1]
    assert "time" not in events.Tags()["scalars"] and "note" not in events.Tags()["scalars"]


def test_names_the_run_once_as_a_text_summary(tmp_path, monkeypatch):
    assert _log(tmp_path, [{"step": 1, "critic/rewards/mean": 0.5}], "gsm8k-agents/seed0", monkeypatch=monkeypatch) == 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert events.Tags()["tensors"] == ["run/text_summary"]
    text = events.Tensors("run/text_summary")[0].tensor_proto.string_val[0].decode()
    assert text == "gsm8k-agents/seed0"
