"""The Python reward host (agentrl_worker.reward_host): start-up line, verl's call signature, results and errors."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from pathlib import Path

from agentrl_worker import reward_host

WORKER_DIR = Path(__file__).resolve().parents[1]
FIXTURES = WORKER_DIR.parent / "test" / "fixtures" / "python-rewards"


def _serve(fixture: str, name: str, calls: list[dict]) -> list[dict]:
    fn, hello = reward_host.load_reward(str(FIXTURES / fixture), name)
    assert hello["ready"] is True and fn is not None
    replies = io.StringIO()
    reward_host.serve(fn, io.StringIO(json.dumps({"batch": calls}) + "\n"), replies)
    return [json.loads(line) for line in replies.getvalue().splitlines()]


def _call(i: int, solution: str, **extra) -> dict:
    return {"id": i, "data_source": "openai/gsm8k", "solution_str": solution, "ground_truth": "18", "extra_info": {}, **extra}


def test_calls_with_verl_keywords_and_reward_kwargs() -> None:
    replies = _serve("gsm8k_score.py", "compute_score", [_call(0, "#### 18"), _call(1, "#### 7"), _call(2, "#### 18", reward_kwargs={"bonus": 0.25})])
    assert replies == [
        {"id": 0, "ok": True, "score": 1.0, "extra": {}},
        {"id": 1, "ok": True, "score": 0.0, "extra": {}},
        {"id": 2, "ok": True, "score": 1.25, "extra": {}},
    ]


def test_dict_result_keeps_the_other_keys_as_extra() -> None:
    [reply] = _serve("with_metrics.py", "score_with_metrics", [_call(5, "#### 18", extra_info={"index": 3}, reward_kwargs={"label": "x"})])
    assert reply == {"id": 5, "ok": True, "score": 0.5, "extra": {"acc": True, "length": 7, "label": "x", "index": 3}}


def test_a_raise_is_reported_with_its_last_line() -> None:
    [reply] = _serve("raises_on_row.py", "compute_score", [_call(0, "x", extra_info={"index": 1})])
    assert reply["ok"] is False
    assert reply["error"] == "ValueError: cannot score row 1"
    assert "Traceback" in reply["traceback"]


def test_non_finite_and_non_numbers_are_errors() -> None:
    replies = _serve("bad_results.py", "compute_score", [_call(i, s) for i, s in enumerate(["nan", "inf", "text", "nodict"])])
    assert [r["ok"] for r in replies] == [False, False, False, False]
    assert replies[0]["error"].startswith("returned nan; expected a finite number")
    assert replies[2]["error"].startswith("returned 'one'; expected")
    assert replies[3]["error"].startswith("returned a dict without 'score'")


def test_to_number_and_plain() -> None:
    assert reward_host.to_number(True) is None
    assert reward_host.to_number("1") is None
    assert reward_host.to_number(math.nan) is None
    assert reward_host.to_number(3) == 3.0
    assert reward_host.plain({"a": math.inf, "b": [1, None, object]}) == {"a": "inf", "b": [1, None, repr(object)]}


def test_load_failures_say_why() -> None:
    fn, hello = reward_host.load_reward(str(FIXTURES / "syntax_error.py"), "compute_score")
    assert fn is None and hello["kind"] == "load" and hello["error"].startswith("SyntaxError: ")
    fn, hello = reward_host.load_reward(str(FIXTURES / "missing_function.py"), "compute_score")
    assert fn is None and hello["kind"] == "missing" and hello["functions"] == ["another_scorer", "score_answer"]


def test_the_process_speaks_json_lines_and_keeps_prints_off_stdout() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentrl_worker.reward_host", str(FIXTURES / "with_metrics.py"), "score_with_metrics"],
        cwd=WORKER_DIR,
        input=json.dumps({"batch": [_call(0, "#### 18")]}) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines[0] == {"ready": True, "functions": ["helper_not_used", "score_with_metrics"]}
    assert lines[1]["ok"] is True and lines[1]["score"] == 0.5
    assert "scoring openai/gsm8k" in proc.stderr


def test_a_file_that_does_not_load_exits_3_after_saying_why() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentrl_worker.reward_host", str(FIXTURES / "syntax_error.py"), "compute_score"],
        cwd=WORKER_DIR, input="", capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == reward_host.LOAD_FAILED_EXIT
    assert json.loads(proc.stdout.splitlines()[0])["ready"] is False
