"""SGLang's native /generate request (GenerateReqInput) and response shapes, for the embedded engine.

Only `input_ids` prompts are served (agentrl tokenizes on its side); `text` is a 400 with a message saying so.
A single prompt with n == 1 answers one object; a batch, or n > 1, answers an array ordered prompt-major
(index i * n + j), and with n > 1 every sample gets a fresh uuid rid, as in SGLang. `priority` (an integer, one for
the whole request) orders the waiting queue when the server runs with --enable-priority-scheduling.
`top_logprobs_num` (one integer, or one per prompt) adds `output_top_logprobs` to a return_logprob answer. Other
GenerateReqInput fields (logprob_start_len, ...) are accepted and ignored, as an older SGLang ignores fields it lacks.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Callable

from .sampling import RequestError, SamplingParams, parse_sampling_params
from .scheduler import Generation


@dataclass
class GenerateRequest:
    generations: list[Generation]
    # Whether the answer is a JSON array (a batch, or n > 1) rather than one object.
    batched: bool


def parse_generate(body: object, context_length: int, vocab_size: int) -> GenerateRequest:
    if not isinstance(body, dict):
        raise RequestError("The request body must be a JSON object.")
    if body.get("stream"):
        raise RequestError("The embedded engine does not stream; send stream: false.")
    if body.get("text") is not None or body.get("input_embeds") is not None:
        raise RequestError("The embedded engine accepts input_ids only (agentrl tokenizes prompts itself).")
    prompts, batched = _prompts(body.get("input_ids"), vocab_size)
    params = _sampling_params(body.get("sampling_params"), len(prompts))
    n = params[0].n
    if any(p.n != n for p in params):
        raise RequestError("The n parameter must be the same for all items of a batch.")
    for i, (prompt, p) in enumerate(zip(prompts, params)):
        total = len(prompt) + p.max_new_tokens
        if total > context_length:
            raise RequestError(
                f"Requested token count exceeds the model's maximum context length of {context_length} tokens. "
                f"You requested a total of {total} tokens: {len(prompt)} tokens from the input messages and "
                f"{p.max_new_tokens} tokens for the completion. Please reduce the number of tokens in the input "
                "messages or the completion to fit within the limit."
            )
    rids = _rids(body.get("rid"), len(prompts), batched, n)
    return_logprob = _per_prompt_flags(body.get("return_logprob"), len(prompts))
    top_logprobs_num = _per_prompt_counts(body.get("top_logprobs_num"), len(prompts))
    priority = _priority(body.get("priority"))
    loras = _lora_paths(body.get("lora_path"), len(prompts))
    generations = []
    for i, (prompt, p) in enumerate(zip(prompts, params)):
        for j in range(n):
            seed = None if p.seed is None else p.seed + j  # the n samples of one seeded prompt must differ
            generations.append(Generation(rid=rids[i * n + j], input_ids=prompt, params=p,
                                          return_logprob=return_logprob[i], seed=seed, priority=priority,
                                          lora=loras[i], top_logprobs_num=top_logprobs_num[i]))
    return GenerateRequest(generations=generations, batched=batched or n > 1)


def _per_prompt(raw: object, count: int, default: object, valid: Callable[[object], bool], error: str) -> list:
    """A GenerateReqInput field given once for every prompt or as a list of one per prompt; absent, `default`."""
    if raw is None:
        return [default] * count
    if valid(raw):
        return [raw] * count
    if isinstance(raw, list) and len(raw) == count and all(valid(v) for v in raw):
        return list(raw)
    raise RequestError(error)


def _lora_paths(raw: object, count: int) -> list[str | None]:
    """SGLang's lora_path: one adapter name for every prompt, or one (or null) per prompt."""
    return _per_prompt(raw, count, None, lambda v: v is None or isinstance(v, str),
                       f"lora_path must be an adapter name or a list of {count} names (or nulls).")


def _priority(raw: object) -> int:
    if raw is None:
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise RequestError(f"priority must be an integer, got {raw!r}.")
    return raw


def _prompts(input_ids: object, vocab_size: int) -> tuple[list[list[int]], bool]:
    if input_ids is None:
        raise RequestError("Either text, input_ids or input_embeds should be provided.")
    if not isinstance(input_ids, list) or not input_ids:
        raise RequestError("input_ids cannot be empty.")
    batched = isinstance(input_ids[0], list)
    prompts = input_ids if batched else [input_ids]
    for i, prompt in enumerate(prompts):
        where = f"input_ids[{i}]" if batched else "input_ids"
        if not isinstance(prompt, list) or not prompt:
            raise RequestError(f"{where} cannot be empty.")
        for token in prompt:
            if not isinstance(token, int) or isinstance(token, bool) or not 0 <= token < vocab_size:
                raise RequestError(f"{where} has {token!r}, not a token id in [0, {vocab_size}).")
    return prompts, batched


def _per_prompt_flags(raw: object, count: int) -> list[bool]:
    return _per_prompt(raw, count, False, lambda v: isinstance(v, bool),
                       f"return_logprob must be a boolean or a list of {count} booleans.")


def _per_prompt_counts(raw: object, count: int) -> list[int]:
    return _per_prompt(raw, count, 0, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                       f"top_logprobs_num must be a non-negative integer or a list of {count} of them.")


def _sampling_params(raw: object, count: int) -> list[SamplingParams]:
    if isinstance(raw, list):
        if len(raw) != count:
            raise RequestError(f"sampling_params has {len(raw)} entries for {count} prompts.")
        return [parse_sampling_params(p) for p in raw]
    return [parse_sampling_params(raw)] * count


def _rids(raw: object, count: int, batched: bool, n: int) -> list[str]:
    if n > 1 or raw is None:
        return [uuid.uuid4().hex for _ in range(count * n)]
    if isinstance(raw, str):
        rids = [f"{raw}_{i}" for i in range(count)] if batched else [raw]
    elif isinstance(raw, list) and all(isinstance(r, str) for r in raw):
        if len(raw) != count:
            raise RequestError(f"rid has {len(raw)} entries for {count} prompts.")
        rids = list(raw)
    else:
        raise RequestError("rid must be a string or a list of strings.")
    if len(set(rids)) != len(rids):
        raise RequestError("Duplicate request ids (rid) in one batch.")
    return rids


def generation_response(gen: Generation, tokenizer) -> dict:
    """SGLang's non-streaming answer for one finished generation."""
    reason = gen.finish_reason or {}
    decoded = gen.output_ids
    if reason.get("type") == "stop" and isinstance(reason.get("matched"), int) and not gen.params.no_stop_trim:
        decoded = decoded[:-1]  # the matched EOS / stop token stays in output_ids but never in text
    text = tokenizer.decode(decoded, skip_special_tokens=gen.params.skip_special_tokens)
    if reason.get("type") == "stop" and isinstance(reason.get("matched"), str) and not gen.params.no_stop_trim:
        cut = text.find(reason["matched"])
        if cut >= 0:
            text = text[:cut]
    meta = {
        "id": gen.rid,
        "finish_reason": gen.finish_reason,
        "prompt_tokens": len(gen.input_ids),
        "completion_tokens": len(gen.output_ids),
        "cached_tokens": gen.cached_tokens,
        "weight_version": gen.weight_version,
        "e2e_latency": (gen.finished_at or time.monotonic()) - gen.created,
    }
    if gen.return_logprob:
        meta["output_token_logprobs"] = [[lp, tok, None] for lp, tok in zip(gen.output_logprobs, gen.output_ids)]
        meta["output_token_logprobs_length"] = len(gen.output_ids)
        if gen.top_logprobs_num > 0:
            meta["output_top_logprobs"] = [[[lp, tok, None] for lp, tok in top] for top in gen.output_top_logprobs]
    return {"text": text, "output_ids": list(gen.output_ids), "meta_info": meta}
