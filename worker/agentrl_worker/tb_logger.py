"""TensorBoard event files from agentrl's metrics: `python -m agentrl_worker.tb_logger DIR`.

Reads metrics records as JSON lines on stdin (the lines agentrl appends to metrics.jsonl) and writes every numeric
value as a scalar at the record's `step`. Exits with code 3 and a one-line message when the tensorboard package is
missing, so the CLI can say so instead of logging nothing in silence.
"""

import json
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python -m agentrl_worker.tb_logger LOG_DIR", file=sys.stderr)
        return 2
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        print("tensorboard is not installed: pip install tensorboard", file=sys.stderr)
        return 3
    writer = SummaryWriter(sys.argv[1])
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
