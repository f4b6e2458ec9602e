"""The CPU demo's GRPO stage (examples/cpu-demo.yaml, docs/cpu-demo.md) in TRL's GRPOTrainer, for
bench/trl-vs-agentrl.mjs (issue 29, item 3). Bench-only: `.venv/bin/python -m pip install --retries 0 trl` first.
It lives in bench/lib so that `npm run bench` (which runs every script at bench/'s top level) does not start it alone.

    .venv/bin/python bench/lib/trl_demo.py --seed 0 --steps 30 --out runs/trl-bench/trl-s0.jsonl

What is the same as `agentrl train --config examples/cpu-demo.yaml`:
- the model and tokenizer (the SFT warm start, runs/cpu-demo-sft/model) and its chat template; the prompt is the same
  tokens as agentrl's (the tool's JSON schema is the one in examples/cpu-demo/vault_tool_config.yaml: TRL would derive
  one from the Python function, with a "return" entry and without "required", which the warm start never saw);
- the data (examples/cpu-demo/data/train.parquet, test.parquet's 100 vaults) and the tool: `open_vault` takes no
  arguments and answers the row's `tools_kwargs.open_vault.create_kwargs.code` (src/tools/vault-tool.ts), here through
  TRL's `environment_factory` (one environment per rollout, `reset` gets the row);
- one tool round and then one more assistant turn (`max_tool_calling_iterations` 1 = agentrl's max_assistant_turns 2);
  64 response tokens in all, tool tokens included (both count the tool turn against the budget, masked out of the loss);
- the reward: src/rewards/vault.ts's correctness-only score, 1 when the text after the last `</tool_response>` (less
  the template's `assistant` line), decoded without special tokens, is exactly the code, else 0;
- n=8 generations, 16 prompts a step (a generation batch of 128), 4 optimizer steps per batch (32 completions each,
  one pass: TRL's steps_per_generation 4, num_iterations 1), AdamW lr 5e-4 constant, no weight decay, grad clip 1,
  PPO clip 0.2, KL to the reference 0.001 with the k3 estimator (verl's low_var_kl, which verl also clamps to ±10),
  temperature 1, advantages reward minus the group mean without the std (scale_rewards "none" = Dr.GRPO's,
  agentrl's norm_adv_by_std_in_grpo false), the loss a token mean ("dapo": over the tokens of the generation batch,
  divided by 4 per optimizer step; agentrl's token-mean divides by each mini-batch's own tokens), torch 1 thread;
- greedy validation on the 100 test vaults before training and every --test-freq steps, through TRL's own multi-turn
  generation (`_generate`, the same tool loop) with do_sample off.

A "step" here is agentrl's: one generation batch of 128 rollouts and its 4 optimizer steps (TRL's global_step counts
optimizer steps, 4 per step). Its seconds are wall time from the start of the generation to the end of the 4th
optimizer step; validation is outside it (as agentrl's timing_s/step).

Output: one JSON line per step on --out (and stdout): {"step", "seconds", "cpu_seconds" (this process's CPU time in
the same window), "reward" (sampled, the batch's mean), "prompts" (the batch's train rows), "val_acc" (when
validated)}; step 0 is the validation before training.

Variants for the sample-efficiency question (docs/benchmarks.md): --no-shuffle keeps the generation batch in prompt
order, so each optimizer step sees 4 whole prompt groups as agentrl's mini-batches do (TRL shuffles the 128
completions before splitting them); --loss-type picks TRL's loss normaliser (dapo, bnpo, dr_grpo, grpo).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_DISABLED", "true")

# The project's venv has wandb without its telemetry dependencies (worker/requirements-wandb.txt); transformers and TRL
# import it whenever it is found, so hide it: this bench logs to JSON lines only.
sys.modules.setdefault("wandb", None)

import torch  # noqa: E402

REPO = Path(__file__).resolve().parent.parent.parent


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(REPO / "runs/cpu-demo-sft/model"))
    p.add_argument("--train", default=str(REPO / "examples/cpu-demo/data/train.parquet"))
    p.add_argument("--test", default=str(REPO / "examples/cpu-demo/data/test.parquet"))
    p.add_argument("--tool-config", default=str(REPO / "examples/cpu-demo/vault_tool_config.yaml"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=30, help="generation steps (each 4 optimizer steps)")
    p.add_argument("--test-freq", type=int, default=10, help="greedy validation every this many steps (and step 0)")
    p.add_argument("--val-max-samples", type=int, default=100)
    p.add_argument("--out", default=None, help="JSON lines file (appended to stdout either way)")
    p.add_argument("--no-shuffle", action="store_true", help="keep prompt groups together in the optimizer steps")
    p.add_argument("--loss-type", default="dapo")
    p.add_argument("--threads", type=int, default=1, help="torch threads (agentrl gives its worker 1)")
    return p.parse_args(argv)


def vault_answer(response_text: str) -> str:
    """src/rewards/vault.ts's vaultAnswer: the text after the last tool response, less the `assistant` role line."""
    close = "</tool_response>"
    at = response_text.rfind(close)
    if at < 0:
        return response_text.strip()
    tail = response_text[at + len(close) :]
    stripped = tail.lstrip()
    if stripped.startswith("assistant\n"):
        tail = stripped[len("assistant\n") :]
    return tail.strip()


class VaultEnv:
    """src/tools/vault-tool.ts in TRL's environment API: `reset` gets the row, `open_vault` answers its code."""

    def __init__(self) -> None:
        self.code: str | None = None

    def reset(self, **row) -> None:
        kwargs = (row.get("tools_kwargs") or {}).get("open_vault") or {}
        code = (kwargs.get("create_kwargs") or {}).get("code", kwargs.get("code"))
        self.code = None if code is None else str(code)
        return None

    def open_vault(self) -> str:
        """open the vault and read its code"""
        return "no vault" if self.code is None else self.code


def load_rows(path: str, limit: int | None = None) -> list[dict]:
    import pandas as pd

    frame = pd.read_parquet(path)
    if limit is not None:
        frame = frame.iloc[:limit]
    rows = []
    for index, r in frame.iterrows():
        tools_kwargs = r["extra_info"]["tools_kwargs"]
        rows.append(
            {
                "index": int(index),
                "prompt": [{"role": m["role"], "content": m["content"]} for m in r["prompt"]],
                "ground_truth": str(r["reward_model"]["ground_truth"]),
                "tools_kwargs": {"open_vault": {"create_kwargs": {"code": str(tools_kwargs["open_vault"]["create_kwargs"]["code"])}}},
            }
        )
    return rows


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    import transformers
    import transformers.utils.chat_template_utils as ctu
    import yaml
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, TrainerCallback

    import trl
    import trl.trainer.grpo_trainer as grpo_module
    from trl import GRPOConfig, GRPOTrainer
    import trl.chat_template_utils as trl_ctu
    from trl.chat_template_utils import qwen3_schema, qwen3_template

    transformers.logging.set_verbosity_error()

    # The tool's schema as agentrl renders it (the same prompt tokens), not the one TRL derives from the function.
    tool_schema = yaml.safe_load(Path(args.tool_config).read_text())["tools"][0]["tool_schema"]
    derive = ctu.get_json_schema

    def get_json_schema(func):
        if getattr(func, "__name__", None) == tool_schema["function"]["name"]:
            return json.loads(json.dumps(tool_schema))
        return derive(func)

    ctu.get_json_schema = get_json_schema

    if args.no_shuffle:
        grpo_module.shuffle_sequence_dict = lambda batch: batch

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    tokenizer.padding_side = "left"
    # The demo's template is Qwen 2.5's tool format (<tool_call>\n{json}\n</tool_call>) but not byte-identical to a
    # template TRL knows, so its Qwen parser is set by hand.
    if getattr(trl_ctu, "_SUPPORTS_RESPONSE_TEMPLATE", True):
        tokenizer.response_template = qwen3_template
    else:  # transformers < 5.13 only knows the legacy schema
        tokenizer.response_schema = qwen3_schema
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)

    train_rows = load_rows(args.train)
    test_rows = load_rows(args.test, args.val_max_samples)
    train = Dataset.from_list(train_rows)

    batches = {"reward": [], "prompts": []}

    def vault_reward(prompts, completions, completion_ids, ground_truth, index, **_):
        texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        scores = [1.0 if vault_answer(t) == g.strip() else 0.0 for t, g in zip(texts, ground_truth)]
        batches["reward"].append(scores)
        batches["prompts"] = sorted(set(index))
        return scores

    out_dir = tempfile.mkdtemp(prefix="trl-demo-")
    optimizer_steps_per_step = 4
    config = GRPOConfig(
        output_dir=out_dir,
        seed=args.seed,
        data_seed=args.seed,
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=32,
        gradient_accumulation_steps=1,
        steps_per_generation=optimizer_steps_per_step,
        num_iterations=1,
        num_generations=8,
        max_completion_length=64,
        max_tool_calling_iterations=1,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        learning_rate=5e-4,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        adam_beta1=0.9,
        adam_beta2=0.999,
        adam_epsilon=1e-8,
        optim="adamw_torch",
        max_grad_norm=1.0,
        epsilon=0.2,
        beta=0.001,
        loss_type=args.loss_type,
        scale_rewards="none",
        max_steps=args.steps * optimizer_steps_per_step,
        logging_steps=optimizer_steps_per_step,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        log_completions=False,
    )

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=vault_reward,
        args=config,
        train_dataset=train,
        processing_class=tokenizer,
        environment_factory=VaultEnv,
    )

    def greedy_accuracy() -> float:
        """Greedy rollouts of the test vaults through TRL's own multi-turn generation (its tool loop), n=1."""
        saved = trainer.generation_config, trainer.generation_kwargs, trainer.environments
        saved_tools = getattr(trainer, "_sync_tool_dicts", None), getattr(trainer, "_async_tool_dicts", None)
        saved_envs = getattr(trainer, "_batch_environments", None)
        kwargs = {k: v for k, v in trainer.generation_kwargs.items() if k not in ("temperature", "top_p", "top_k", "min_p")}
        kwargs["do_sample"] = False
        trainer.generation_config = GenerationConfig(**kwargs, disable_compile=True)
        trainer.generation_kwargs = kwargs
        envs = [VaultEnv() for _ in test_rows]
        for env, row in zip(envs, test_rows):
            env.reset(**row)
        trainer.environments = envs
        trainer._batch_environments = [None] * len(test_rows)
        trainer._sync_tool_dicts = [{"open_vault": env.open_vault} for env in envs]
        trainer._async_tool_dicts = [{} for _ in envs]
        was_training = trainer.model.training
        trainer.model.eval()
        try:
            with torch.no_grad():
                _, completion_ids, *_ = trainer._generate([row["prompt"] for row in test_rows])
        finally:
            trainer.model.train(was_training)
            trainer.generation_config, trainer.generation_kwargs, trainer.environments = saved
            trainer._sync_tool_dicts, trainer._async_tool_dicts = saved_tools
            trainer._batch_environments = saved_envs
            trainer._metrics["eval"].clear()
        texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        right = sum(vault_answer(t) == row["ground_truth"] for t, row in zip(texts, test_rows))
        return right / len(test_rows)

    out = open(args.out, "a") if args.out else None

    def emit(record: dict) -> None:
        line = json.dumps(record)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    class StepClock(TrainerCallback):
        """Times each generation step (4 optimizer steps) and validates outside the timed window."""

        def __init__(self) -> None:
            self.started = None

        def on_train_begin(self, a, state, control, **kw):
            t0 = time.perf_counter()
            acc = greedy_accuracy()
            emit({"system": "trl", "seed": args.seed, "step": 0, "val_acc": acc, "val_seconds": round(time.perf_counter() - t0, 3),
                  "trl": trl.__version__, "threads": torch.get_num_threads(), "shuffle": not args.no_shuffle, "loss_type": args.loss_type})

        def on_step_begin(self, a, state, control, **kw):
            if state.global_step % optimizer_steps_per_step == 0:
                self.started = time.perf_counter()
                self.cpu_started = time.process_time()

        def on_step_end(self, a, state, control, **kw):
            if state.global_step % optimizer_steps_per_step != 0:
                return
            seconds = time.perf_counter() - self.started
            cpu_seconds = time.process_time() - self.cpu_started
            step = state.global_step // optimizer_steps_per_step
            rewards = batches["reward"][-1] if batches["reward"] else []
            record = {"system": "trl", "seed": args.seed, "step": step, "seconds": round(seconds, 4),
                      "cpu_seconds": round(cpu_seconds, 4), "reward": sum(rewards) / max(len(rewards), 1), "prompts": batches["prompts"]}
            if step % args.test_freq == 0 or step == args.steps:
                t0 = time.perf_counter()
                record["val_acc"] = greedy_accuracy()
                record["val_seconds"] = round(time.perf_counter() - t0, 3)
            emit(record)

    clock = StepClock()
    trainer.add_callback(clock)
    trainer.train()
    if out:
        out.close()
    shutil.rmtree(out_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
