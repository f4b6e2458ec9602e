"""Continuous batching: one thread owns the model and runs decode steps over every active generation together.

HTTP threads submit `Generation`s and wait on their `done` event. Between decode steps the scheduler thread finishes
aborted rows, admits waiting generations (prefilling each new prompt once, so the n samples of one prompt share a
prefill), and runs weight updates once no generation is running; generations that arrive during an update wait
for it, so one generation never mixes two weight versions.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import traceback
from collections import deque
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Callable

import torch

from .kv_batch import DecodeBatch, PrefillRequest, Prefilled
from .lora import LoraAdapters
from .prefix_cache import PrefixCache
from .model import LoadedModel
from .sampling import SamplingParams, choose_tokens, sampling_logprobs, top_alternatives

# A distinct prompt of one admission: its LoRA adapter (None: the base model) and its token ids.
PromptKey = tuple[str | None, tuple[int, ...]]

log = logging.getLogger("agentrl_worker.embedded_server")


@dataclass(eq=False)  # identity semantics: `in` and list lookups must not compare tensors field by field
class Generation:
    """One sample: a prompt, its sampling parameters, and what has been generated so far."""

    rid: str
    input_ids: list[int]
    params: SamplingParams
    return_logprob: bool
    seed: int | None
    # SGLang's request priority: with priority scheduling, waiting generations start higher values first.
    priority: int = 0
    created: float = field(default_factory=time.monotonic)
    output_ids: list[int] = field(default_factory=list)
    output_logprobs: list[float] = field(default_factory=list)
    # SGLang's top_logprobs_num: how many alternatives to report at each output position, and those reported.
    top_logprobs_num: int = 0
    output_top_logprobs: list[list[tuple[float, int]]] = field(default_factory=list)
    # SGLang's finish_reason object; None while running.
    finish_reason: dict | None = None
    cached_tokens: int = 0
    weight_version: str = "default"
    finished_at: float | None = None
    abort_message: str | None = None
    done: threading.Event = field(default_factory=threading.Event)
    generator: torch.Generator | None = None
    # The LoRA adapter the request named in lora_path (None: the base model); its name is the weight version.
    lora: str | None = None


@dataclass(eq=False)
class WeightUpdate:
    # Runs on the scheduler thread once no generation is running; returns how many tensors it loaded, raises on failure.
    load: Callable[[], int]
    weight_version: str | None
    # A disk update names the folder, which becomes the served model name (as in SGLang); other updates keep the name.
    model_path: str | None = None
    # A new base model invalidates the prefix cache; an adapter load does not (adapter rows never use the cache).
    clears_cache: bool = True
    # What the log line says the update did, and to what: an adapter's unload drops its tensors, it loads none.
    action: str = "loaded"
    source: str | None = None
    done: threading.Event = field(default_factory=threading.Event)
    success: bool = False
    message: str = ""
    num_paused_requests: int = 0


class Scheduler:
    def __init__(self, loaded: LoadedModel, max_batch: int = 64, random_seed: int | None = None,
                 priority_scheduling: bool = False, prefix_cache_bytes: int = 0,
                 adapters: LoraAdapters | None = None):
        self.loaded = loaded
        # --enable-lora: the adapters requests may name (lora.py); None refuses every lora_path.
        self.adapters = adapters
        self.max_batch = max_batch
        # SGLang's --enable-priority-scheduling: the waiting queue is ordered by priority (higher first), arrival order
        # within one; running generations are never preempted. Off: first come, first served, priority ignored.
        self.priority_scheduling = priority_scheduling
        self.weight_version = "default"
        self.served_model_name = loaded.model_path
        self.tokens_generated = 0
        self.peak_running = 0  # the most generations that shared one decode forward pass
        self._cond = threading.Condition()
        self._waiting: deque[Generation] = deque()
        self._running: list[Generation] = []  # row i of self._batch
        self._pending_tokens: list[int] = []  # the token row i sampled last, fed at the next step
        self._updates: deque[WeightUpdate] = deque()
        # Every unfinished generation by id(), wherever it is (queue, prefill, batch): what /abort_request searches.
        self._live_gens: dict[int, Generation] = {}
        self._batch = DecodeBatch(loaded.model, loaded.device)
        self.prefix_cache = PrefixCache(prefix_cache_bytes)
        # Seeds for generations without a sampling_seed: fixed by --random-seed, else from the OS.
        self._seed_source = random.Random(random_seed)
        self._stopped = False
        # /pause_generation: no admission and no decode steps until /continue_generation; weight updates go ahead.
        self._paused = False
        self._thread = threading.Thread(target=self._loop, name="embedded-server-scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(timeout=30)

    def alive(self) -> bool:
        return self._thread.is_alive()

    # ---- called from HTTP threads ----

    def submit(self, generations: list[Generation]) -> None:
        with self._cond:
            for gen in generations:
                self._enqueue(gen)
            for gen in generations:
                self._live_gens[id(gen)] = gen
            self._cond.notify_all()

    def _enqueue(self, gen: Generation) -> None:
        """Behind every waiting generation of the same or a higher priority (all of them without priority scheduling)."""
        at = len(self._waiting)
        if self.priority_scheduling:
            while at > 0 and self._waiting[at - 1].priority < gen.priority:
                at -= 1
        self._waiting.insert(at, gen)

    def abort(self, rid: str, abort_all: bool) -> None:
        """Mark matching generations (exact rid, or all); the scheduler finishes them before its next step."""
        with self._cond:
            for gen in self._live_gens.values():
                if abort_all or gen.rid == rid:
                    gen.abort_message = "Aborted by /abort_request."
            self._cond.notify_all()

    def pause(self, abort_running: bool) -> None:
        """Stop scheduling; with abort_running (SGLang's mode "abort"), every unfinished generation is aborted."""
        with self._cond:
            self._paused = True
            if abort_running:
                for gen in self._live_gens.values():
                    gen.abort_message = "Aborted by /pause_generation."
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def update_weights(self, update: WeightUpdate, abort_all: bool = False) -> WeightUpdate:
        """Queues `update` and returns once the scheduler thread has applied it (or failed to)."""
        if abort_all:
            self.abort("", abort_all=True)
        with self._cond:
            self._updates.append(update)
            self._cond.notify_all()
        update.done.wait()
        return update

    def load(self) -> dict:
        with self._cond:
            return {"num_running_reqs": len(self._running), "num_waiting_reqs": len(self._waiting)}

    def is_idle(self) -> bool:
        with self._cond:
            return not self._running and not self._waiting

    # ---- the scheduler thread ----

    def _loop(self) -> None:
        while True:
            admitted: list[Generation] = []
            try:
                with self._cond:
                    while not self._stopped and not self._has_work():
                        self._cond.wait()
                    if self._stopped:
                        self._fail_all("The server is shutting down.")
                        return
                    self._finish_aborted()
                    # An update waits for running generations, unless generation is paused (SGLang's writer lock).
                    ready = self._updates and (not self._running or self._paused)
                    update = self._updates.popleft() if ready else None
                    # Nothing is admitted in the pass that applies an update (the pass ends there), nor while another
                    # waits: admitted here and dropped by the `continue`, a generation would never answer.
                    if update is None and not self._updates and not self._paused:
                        while self._waiting and len(self._running) + len(admitted) < self.max_batch:
                            admitted.append(self._waiting.popleft())
                if update is not None:
                    self._apply_update(update)
                    continue
                self._admit(admitted)
                if self._running and not self._paused:
                    self._decode_step()
            except Exception as error:  # a failing step must not kill the server (or hang its callers): fail them
                log.error("scheduler step failed: %s", traceback.format_exc())
                with self._cond:
                    for gen in admitted:
                        if gen.finish_reason is None:
                            self._finish(gen, _abort(f"Engine error: {error}", 500))
                    self._fail_running(f"Engine error: {error}")

    def _has_work(self) -> bool:
        if self._updates or any(gen.abort_message is not None for gen in self._live_gens.values()):
            return True
        return not self._paused and bool(self._waiting or self._running)

    def _admit(self, admitted: list[Generation]) -> None:
        """Prefill new generations (once per distinct prompt; the base model's in shared passes) and sample their first
        tokens."""
        prefills: dict[PromptKey, Prefilled] = {}
        base: dict[PromptKey, Generation] = {}  # the base model's prompts, prefilled together below
        started: list[tuple[Generation, PromptKey]] = []
        for gen in admitted:
            if gen.abort_message is not None:
                self._finish(gen, _abort(gen.abort_message))
                continue
            if gen.lora is not None and (self.adapters is None or gen.lora not in self.adapters.adapters):
                # unloaded while it waited: never the base model instead
                self._finish(gen, _abort(f"LoRA adapter {gen.lora!r} is not loaded.", 400))
                continue
            gen.weight_version = gen.lora if gen.lora is not None else self.weight_version
            seed = gen.seed if gen.seed is not None else self._seed_source.getrandbits(63)
            gen.generator = _generator(seed, self.loaded.device)
            if gen.params.max_new_tokens == 0:
                self._finish(gen, {"type": "length", "length": 0})
                continue
            key = (gen.lora, tuple(gen.input_ids))
            if key in prefills or key in base:
                gen.cached_tokens = len(gen.input_ids)
            elif gen.lora is not None:  # the prefix cache holds the base model's key/values only
                with self._rows([gen]):
                    prefills[key] = self._batch.prefill(gen.input_ids)
            else:
                base[key] = gen
            started.append((gen, key))
        self._prefill_base(base, prefills)
        if not started:
            return
        logits = torch.stack([prefills[key].last_logits for _, key in started])
        tokens = self._append_tokens([gen for gen, _ in started], logits)
        joining = []
        for (gen, key), token in zip(started, tokens):
            if gen.finish_reason is None:
                joining.append(prefills[key])
                self._running.append(gen)
                self._pending_tokens.append(token)
        self._batch.add(joining)

    def _prefill_base(self, base: dict[PromptKey, Generation], prefills: dict[PromptKey, Prefilled]) -> None:
        """The base model's new prompts in as few passes as DecodeBatch.prefill_many can, each from the longest prefix
        the prefix cache holds; each prompt's key/value then goes into the cache for the turns that resend it."""
        if not base:
            return
        requests = []
        for gen in base.values():
            start, cached = self.prefix_cache.lookup(gen.input_ids)
            requests.append(PrefillRequest(gen.input_ids, cached, start))
        with self._rows(list(base.values())):
            done = self._batch.prefill_many(requests)
        for (key, gen), request, prefill in zip(base.items(), requests, done):
            gen.cached_tokens = request.start
            prefills[key] = prefill
            self.prefix_cache.insert(gen.input_ids, prefill.kv)

    def _rows(self, gens: list[Generation]):
        """The adapter of each row for the model calls inside (a no-op without --enable-lora)."""
        return nullcontext() if self.adapters is None else self.adapters.active([g.lora for g in gens])

    def _decode_step(self) -> None:
        with self._rows(self._running):
            logits = self._batch.step(self._pending_tokens)
        self.peak_running = max(self.peak_running, len(self._running))
        self._pending_tokens = self._append_tokens(self._running, logits)
        with self._cond:
            self._drop_finished()

    def _append_tokens(self, gens: list[Generation], logits: torch.Tensor) -> list[int]:
        """Sample one token for each generation (row i of logits), record it, and finish those that are done."""
        params = [g.params for g in gens]
        # One log-softmax for both: the chosen tokens' log-probs and, for rows that ask, the most likely ones.
        distribution = sampling_logprobs(logits, params)
        tokens, logprobs = choose_tokens(logits, params, [g.generator for g in gens], distribution)
        tops = top_alternatives(distribution, [g.top_logprobs_num if g.return_logprob else 0 for g in gens])
        for gen, token, logprob, top in zip(gens, tokens, logprobs, tops):
            gen.output_ids.append(token)
            gen.output_logprobs.append(logprob)
            if top is not None:
                gen.output_top_logprobs.append(top)
            reason = self._finish_reason(gen)
            if reason is not None:
                self._finish(gen, reason)
        self.tokens_generated += len(gens)
        return tokens

    def _finish_reason(self, gen: Generation) -> dict | None:
        """SGLang's order: the length limit first, then EOS / stop tokens, then stop strings."""
        params, token = gen.params, gen.output_ids[-1]
        if len(gen.output_ids) >= params.max_new_tokens:
            return {"type": "length", "length": params.max_new_tokens}
        if (not params.ignore_eos and token in self.loaded.eos_token_ids) or token in params.stop_token_ids:
            return {"type": "stop", "matched": token}
        if params.stop:
            longest = max(len(s) for s in params.stop)
            tail = self.loaded.tokenizer.decode(gen.output_ids[-(longest + 1) :])
            for stop in params.stop:
                if stop in tail:
                    return {"type": "stop", "matched": stop}
        return None

    def _finish(self, gen: Generation, reason: dict) -> None:
        with self._cond:
            self._live_gens.pop(id(gen), None)
        gen.finish_reason = reason
        gen.finished_at = time.monotonic()
        gen.done.set()

    def _finish_aborted(self) -> None:
        for gen in list(self._waiting):
            if gen.abort_message is not None:
                self._waiting.remove(gen)
                self._finish(gen, _abort(gen.abort_message))
        for gen in self._running:
            if gen.abort_message is not None and gen.finish_reason is None:
                self._finish(gen, _abort(gen.abort_message))
        self._drop_finished()

    def _drop_finished(self) -> None:
        keep = [i for i, gen in enumerate(self._running) if gen.finish_reason is None]
        if len(keep) == len(self._running):
            return
        if self.prefix_cache.max_bytes > 0:
            # The next turn of a conversation resends this sequence: keep what the row computed for it.
            for i, gen in enumerate(self._running):
                if gen.finish_reason is not None and gen.lora is None:
                    self.prefix_cache.insert(gen.input_ids + gen.output_ids[:-1], self._batch.row_kv(i))
        self._batch.keep(keep)
        self._running = [self._running[i] for i in keep]
        self._pending_tokens = [self._pending_tokens[i] for i in keep]

    def _fail_running(self, message: str) -> None:
        for gen in self._running:
            if gen.finish_reason is None:
                self._finish(gen, _abort(message, 500))
        self._running, self._pending_tokens = [], []
        self._batch.keep([])

    def _fail_all(self, message: str) -> None:
        self._fail_running(message)
        while self._waiting:
            self._finish(self._waiting.popleft(), _abort(message, 503))
        while self._updates:
            update = self._updates.popleft()
            update.message = message
            update.done.set()

    def _apply_update(self, update: WeightUpdate) -> None:
        if update.clears_cache:
            self.prefix_cache.clear()  # computed by the old weights (and a failed update may have loaded some tensors)
        try:
            count = update.load()
        except Exception as error:  # noqa: BLE001 (any failure is the update's answer; the caller must not hang)
            update.success, update.message = False, f"Failed to update weights: {error}"
        else:
            update.num_paused_requests = len(self._running)  # nonzero only while paused in place
            if update.weight_version is not None:
                self.weight_version = update.weight_version
            elif update.model_path is not None:  # a disk update without a version counts up; a bucket leaves it
                self.weight_version = _next_version(self.weight_version)
            if update.model_path is not None:
                self.served_model_name = update.model_path
            update.success, update.message = True, "Succeeded to update model weights."
            source = update.source or f"from {update.model_path or 'the trainer'}"
            log.info("%s %d tensors %s, weight_version %s", update.action, count, source, self.weight_version)
        update.done.set()


def _abort(message: str, status_code: int | None = None) -> dict:
    return {"type": "abort", "message": message, "status_code": status_code, "err_type": None}


def _generator(seed: int, device: torch.device) -> torch.Generator:
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def _next_version(version: str) -> str:
    """Without an explicit weight_version an update counts up: default -> 1 -> 2 ..."""
    return str(int(version) + 1) if version.isdigit() else "1"
