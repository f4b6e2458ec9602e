"""The training side of a GRPO step against its compute floor (issue 29, item 1): the worker's log-prob pass and update
beside a bare PyTorch loop that runs the same passes on the same batch, in one process, one rank, one thread each.

    .venv/bin/python bench/compute_floor.py [--shape demo|0.5b] [--prompts 16] [--samples 8] [--system 190]
        [--prompt 221] [--response 20] [--mini-batches 4] [--repeats 3] [--json]

The batch is shaped like a GRPO step's: `prompts` groups of `samples` rows; a group's rows share their prompt
(`prompt` tokens), every prompt starts with the same `system` tokens (a system prompt with the tool schema), and each
row ends in its own `response` sampled tokens (mask 1). The defaults are the CPU demo's step (221-token prompts, 20
response tokens, 16 x 8 rows, 4 mini-batches) on the demo's random-init model; `--shape 0.5b` is a random-init model of Qwen2.5-0.5B's shape
(hidden 896, 24 layers, 14 heads, 2 KV heads, intermediate 4864, tied embeddings, the Qwen3 tokenizer's 151k vocab),
with a smaller batch by default (2 x 4 rows, 160-token prompts with a 120-token system prefix, 32 response tokens,
2 mini-batches) because a CPU does about one such forward token per millisecond.

- agentrl: `Trainer.compute_log_probs` (actor and reference, as with use_kl_loss) then `Trainer.update` (one
  optimizer step per mini-batch), through batch files as the CLI drives them.
- floor: what a bare loop would write (TRL's GRPOTrainer computes its log-probs this way): for the log-probs, each
  model's forward over all rows with `logits_to_keep` = the response, `log_softmax`, `gather`; for each mini-batch,
  forward, the clipped policy loss with a low-variance KL to the reference (token mean), backward, gradient clipping
  and an AdamW step. No micro-batching, no file, no padding logic, every row run in full.

Both start from the same weights; the time of each is the median over repeats of the whole pass (after one warm-up).
The ratio agentrl / floor is the issue's measure (its target: within 1.3x). agentrl runs each micro-batch's shared
prefix once (worker option share_prefix), which the bare loop does not, so below 1.0 is possible; `--no-share-prefix`
shows the worker's cost without it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "worker"))
sys.path.insert(0, str(ROOT / "worker" / "tests"))

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from agentrl_worker.config import WorkerConfig  # noqa: E402
from agentrl_worker.make_tiny import make_tiny  # noqa: E402
from agentrl_worker.trainer import Trainer  # noqa: E402
from worker_harness import TOKENIZER_DIR, cpu_rank  # noqa: E402

SHAPES = {
    # name: make_tiny arguments (None: the CPU demo's own random-init model, on its 64-token vocabulary), default batch
    # (prompts, samples, system, prompt, response, mini-batches)
    "demo": (None, (16, 8, 190, 221, 20, 4)),
    "0.5b": ({"layers": 24, "hidden": 896, "heads": 14, "kv_heads": 2, "intermediate": 4864, "tie": True, "arch": "qwen2"},
             (2, 4, 120, 160, 32, 2)),
}
CLIP, KL_COEF, LR = 0.2, 0.001, 1e-6


def make_batch(vocab: int, prompts: int, samples: int, system: int, prompt: int, response: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    shared = torch.randint(0, vocab, (system,), generator=gen)
    rows = []
    for _ in range(prompts):
        question = torch.cat([shared, torch.randint(0, vocab, (prompt - system,), generator=gen)])
        rows += [torch.cat([question, torch.randint(0, vocab, (response,), generator=gen)]) for _ in range(samples)]
    input_ids = torch.stack(rows)
    response_mask = torch.zeros_like(input_ids)
    response_mask[:, prompt:] = 1
    return {
        "input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "response_mask": response_mask,
        "rewards": torch.randint(0, 2, (len(rows),), generator=gen).float(),
        "group_ids": torch.arange(prompts).repeat_interleave(samples),
    }


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def agentrl_step(trainer: Trainer, work: Path) -> None:
    trainer.compute_log_probs(str(work / "batch.safetensors"), str(work / "log_probs.safetensors"))
    trainer.update(str(work / "batch.safetensors"), str(work / "log_probs.safetensors"))


class BareLoop:
    """The floor: the same passes, written plainly."""

    def __init__(self, model_dir: Path, batch: dict[str, torch.Tensor], prompt: int, mini_batches: int):
        from transformers import AutoModelForCausalLM

        self.actor = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        self.ref = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval().requires_grad_(False)
        self.optimizer = torch.optim.AdamW(self.actor.parameters(), lr=LR, weight_decay=0.0)
        self.batch, self.prompt = batch, prompt
        rows = batch["input_ids"].shape[0]
        self.mini = [list(range(i, min(i + rows // mini_batches, rows))) for i in range(0, rows, rows // mini_batches)]

    def log_probs(self, model, rows) -> torch.Tensor:
        ids = self.batch["input_ids"][rows]
        keep = ids.shape[1] - self.prompt + 1
        logits = model(input_ids=ids, use_cache=False, logits_to_keep=keep).logits[:, :-1]
        return torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, self.prompt :, None]).squeeze(-1)

    def step(self) -> None:
        everything = list(range(self.batch["input_ids"].shape[0]))
        with torch.no_grad():
            old, ref = self.log_probs(self.actor, everything), self.log_probs(self.ref, everything)
        rewards, groups = self.batch["rewards"], self.batch["group_ids"]
        means = torch.stack([rewards[groups == g].mean() for g in groups.unique()])[groups]
        advantages = (rewards - means)[:, None]
        for rows in self.mini:
            logp = self.log_probs(self.actor, rows)
            ratio = torch.exp(logp - old[rows])
            pg = -torch.minimum(ratio * advantages[rows], ratio.clamp(1 - CLIP, 1 + CLIP) * advantages[rows])
            delta = (ref[rows] - logp).clamp(-20, 20)
            kl = (torch.exp(delta) - delta - 1).clamp(-10, 10)
            (pg + KL_COEF * kl).mean().backward()
            torch.nn.utils.clip_grad_norm_(self.actor.parameters(), 1.0)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="demo")
    for name in ("prompts", "samples", "system", "prompt", "response", "mini-batches"):
        parser.add_argument(f"--{name}", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-share-prefix", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model_args, defaults = SHAPES[args.shape]
    names = ("prompts", "samples", "system", "prompt", "response", "mini_batches")
    shape = {name: getattr(args, name) if getattr(args, name) is not None else default for name, default in zip(names, defaults)}

    with tempfile.TemporaryDirectory(prefix="agentrl-floor-") as tmp:
        work = Path(tmp)
        if model_args is None:
            model_dir = work / "model"
            shutil.copytree(ROOT / "examples" / "cpu-demo" / "model", model_dir)
        else:
            model_dir = make_tiny(TOKENIZER_DIR, out=work / "model", seed=0, **model_args)
        vocab = json.loads((model_dir / "config.json").read_text())["vocab_size"]
        batch = make_batch(vocab, shape["prompts"], shape["samples"], shape["system"], shape["prompt"], shape["response"])
        save_file(batch, str(work / "batch.safetensors"))
        with cpu_rank(work):
            trainer = Trainer(WorkerConfig.from_dict({
                "model_path": str(model_dir), "lr": LR, "use_ref": True, "use_kl_loss": True, "kl_loss_coef": KL_COEF,
                "kl_loss_type": "low_var_kl", "ppo_mini_batch_size": shape["prompts"] // shape["mini_batches"],
                "micro_batch_token_budget": 16384, "share_prefix": not args.no_share_prefix,
            }))
            agentrl = median_time(lambda: agentrl_step(trainer, work), args.repeats)
        bare = BareLoop(model_dir, batch, shape["prompt"], shape["mini_batches"])
        floor = median_time(bare.step, args.repeats)
    result = {"shape": args.shape, **shape, "share_prefix": not args.no_share_prefix, "agentrl_s": agentrl,
              "floor_s": floor, "ratio": agentrl / floor, "threads": torch.get_num_threads()}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.shape}: {shape['prompts']}x{shape['samples']} rows, prompt {shape['prompt']} (system {shape['system']}), "
              f"response {shape['response']}, {shape['mini_batches']} mini-batches | agentrl {agentrl:.3f} s | "
              f"bare loop {floor:.3f} s | ratio {agentrl / floor:.2f}x (share_prefix {not args.no_share_prefix})")


if __name__ == "__main__":
    main()
