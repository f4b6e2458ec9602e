"""Weights & Biases logging of agentrl's metrics: `python -m agentrl_worker.wandb_logger --dir DIR --project P --name N --id ID`.

The CLI starts it when `trainer.logger` names wandb (src/train/wandb.ts) and writes JSON lines on its stdin:

- first `{"config": {...}}`: the run's effective config, the wandb run's config;
- then every metrics record agentrl appends to metrics.jsonl (`{"step": 3, "time": ..., "<metric>": value, ...}`),
  logged at its `step`;
- and, at a validation with `trainer.log_val_generations`, `{"table": KEY, "step": S, "columns": [...], "rows": [[...]]}`,
  logged as a wandb.Table under KEY at step S.

The run is `wandb.init(project=P, name=N, id=ID, resume="allow")`: the CLI keeps ID in the run folder, so `--resume`
continues the same wandb run. WANDB_MODE (offline, disabled), WANDB_ENTITY, WANDB_DIR and wandb's other variables work
as usual; the run's files go under DIR/wandb unless WANDB_DIR is set. Prints `{"event": "started", ...}` on stdout once
the run is up. Exits with code 3 and one line on stderr when wandb is not installed, 4 when wandb.init fails, 5 when a
log fails: the CLI says so once and goes on training (the metrics stay in metrics.jsonl). SIGINT is ignored: the CLI
ends the run by closing stdin, after which the run is finished (wandb.finish) and the process exits.
"""

import argparse
import enum
import json
import signal
import sys
import types

NOT_LOGGED = ("step", "time")


def import_wandb():
    """`import wandb`, also where opentelemetry-sdk is missing (installed with --no-deps, worker/requirements-wandb.txt).

    wandb imports `opentelemetry.sdk.metrics.export` at import time for one enum of its own usage telemetry. Without the
    sdk, that module is replaced by a stand-in holding the enum, and wandb's telemetry is turned off: it could not
    export anything without the sdk. Raises ImportError when wandb itself is missing.
    """
    try:
        import wandb
        return wandb
    except ModuleNotFoundError as err:
        if not (err.name or "").startswith("opentelemetry.sdk"):
            raise
    for name in [name for name in sys.modules if name == "wandb" or name.startswith("wandb.")]:
        del sys.modules[name]  # the half-imported package
    stand_in = types.ModuleType("opentelemetry.sdk.metrics.export")

    class AggregationTemporality(enum.IntEnum):  # opentelemetry.sdk.metrics.export's values
        UNSPECIFIED = 0
        DELTA = 1
        CUMULATIVE = 2

    stand_in.AggregationTemporality = AggregationTemporality
    sys.modules[stand_in.__name__] = stand_in
    import wandb
    from wandb.analytics.opentelemetry import opentelemetry_proxy

    opentelemetry_proxy.disable()
    return wandb


def scalars(record):
    """The record's numbers, without its step and time: what is logged."""
    return {
        key: value
        for key, value in record.items()
        if key not in NOT_LOGGED and not isinstance(value, bool) and isinstance(value, (int, float))
    }


def fail(code, what, err):
    """One line on stderr (the CLI shows the last one), the exit code."""
    reason = "; ".join(line.strip() for line in str(err).splitlines() if line.strip())
    print(f"{what}: {type(err).__name__}: {reason}", file=sys.stderr, flush=True)
    return code


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl_worker.wandb_logger")
    parser.add_argument("--dir", help="where wandb's folder goes (wandb.init's dir); WANDB_DIR when omitted")
    parser.add_argument("--project", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--id", required=True, help="the wandb run id; the same id continues the same run")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group; the CLI closes stdin instead
    try:
        wandb = import_wandb()
    except ImportError as err:
        return fail(3, "wandb is not installed (pip install wandb)", err)
    first = sys.stdin.readline()
    config = json.loads(first).get("config") if first.strip() else None
    try:
        run = wandb.init(
            project=args.project, name=args.name, id=args.id, resume="allow", dir=args.dir, config=config,
            # The CLI prints its own console; this process has nothing to capture.
            settings=wandb.Settings(console="off"),
        )
    except Exception as err:  # noqa: BLE001 - any failure of wandb must leave training alone
        return fail(4, "wandb.init failed", err)
    url = None if run.offline else run.url  # an offline run has none (and wandb warns when asked)
    print(json.dumps({"event": "started", "id": run.id, "url": url, "dir": run.dir, "offline": run.offline}), flush=True)
    code = 0
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            record = json.loads(line)
            step = int(record.get("step", 0))
            if "table" in record:
                run.log({record["table"]: wandb.Table(columns=record["columns"], data=record["rows"])}, step=step)
            else:
                run.log(scalars(record), step=step)
    except Exception as err:  # noqa: BLE001
        code = fail(5, "wandb.log failed", err)
    run.finish(exit_code=code)
    return code


if __name__ == "__main__":
    sys.exit(main())
