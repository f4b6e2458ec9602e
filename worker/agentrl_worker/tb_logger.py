"""TensorBoard event files from agentrl's metrics: `python -m agentrl_worker.tb_logger DIR [RUN_NAME]`.

RUN_NAME (`<trainer.project_name>/<trainer.experiment_name>`, as verl names its tracking runs) is written once as the
text summary `run`, so event files copied elsewhere (or synced to wandb) still say which run they are. Reads metrics records as JSON lines on stdin (the lines agentrl appends to metrics.jsonl) and writes every numeric
value as a scalar at the record's `step`. Exits with code 3 and a one-line message when the tensorboard package is
missing, so the CLI can say so instead of logging nothing in silence.
"""

import json
import sys


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print("usage: python -m agentrl_worker.tb_logger LOG_DIR [RUN_NAME]", file=sys.stderr)
        return 2
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        print("tensorboard is not installed: pip install tensorboard", file=sys.stderr)
        return 3
    writer = SummaryWriter(sys.argv[1])
    if len(sys.argv) == 3:
        writer.add_text("run", sys.argv[2], 0)
    for line in sys.stdin:
        if not line.strip():
            continue
        record = json.loads(line)
        step = int(record.get("step", 0))
        for key, value in record.items():
            if key in ("step", "time", "event") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            writer.add_scalar(key, value, step)
        writer.flush()
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
