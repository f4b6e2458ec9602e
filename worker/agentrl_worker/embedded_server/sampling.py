"""SGLang's `sampling_params` for the embedded engine: validation, and choosing the next token with its logprob.

Logprob convention (SGLang's default, `SGLANG_RETURN_ORIGINAL_LOGPROB` unset; sampler.py):
- greedy (temperature < 1e-6): the token is argmax(logits) and its logprob is log_softmax(logits), the temperature-1 view;
- sampling: tokens are drawn from softmax(logits / T) after top-k and top-p filtering and renormalisation, but the
  reported logprob is log softmax(logits / T) over the full vocabulary, NOT renormalised over the kept tokens.
  That is exactly what a trainer computes as log_softmax(logits / T), so with top_p=1 and top_k=-1 the reported
  logprob is the log-probability the token was drawn with; with top-p/top-k it is the pre-filter value, as in SGLang.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

GREEDY_BELOW = 1e-6


class RequestError(ValueError):
    """A request SGLang would answer with HTTP 400 {"error": {"message"}}."""


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    stop: tuple[str, ...] = ()
    stop_token_ids: frozenset[int] = field(default_factory=frozenset)
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    no_stop_trim: bool = False
    n: int = 1
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_BELOW


_KNOWN_IGNORED = {
    # Accepted so that clients written for SGLang keep working; the embedded engine does not implement them.
    "min_new_tokens", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "stop_regex",
    "spaces_between_special_tokens", "json_schema", "regex", "ebnf", "structural_tag", "custom_params",
    "stream_interval", "logit_bias",
}


def parse_sampling_params(raw: object) -> SamplingParams:
    """Validate one `sampling_params` object; null values fall back to SGLang's defaults, as SGLang does."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RequestError("sampling_params must be an object")
    values = {k: v for k, v in raw.items() if v is not None}
    unknown = set(values) - set(_FIELDS) - _KNOWN_IGNORED - {"sampling_seed", "seed"}
    if unknown:
        raise RequestError(f"sampling_params has unknown keys: {', '.join(sorted(unknown))}")
    for name, kind in _FIELDS.items():
        if name in values and not _is(values[name], kind):
            raise RequestError(f"sampling_params.{name} must be {kind}, got {values[name]!r}")

    stop = values.get("stop", ())
    stop = (stop,) if isinstance(stop, str) else tuple(stop)
    seed = values.get("sampling_seed", values.get("seed"))
    if seed is not None and not _is(seed, "int"):
        raise RequestError(f"sampling_params.sampling_seed must be an int, got {seed!r}")
    params = SamplingParams(
        max_new_tokens=values.get("max_new_tokens", 128),
        temperature=float(values.get("temperature", 1.0)),
        top_p=float(values.get("top_p", 1.0)),
        top_k=values.get("top_k", -1),
        stop=stop,
        stop_token_ids=frozenset(values.get("stop_token_ids", ())),
        ignore_eos=values.get("ignore_eos", False),
        skip_special_tokens=values.get("skip_special_tokens", True),
        no_stop_trim=values.get("no_stop_trim", False),
        n=values.get("n", 1),
        seed=seed,
    )
    if params.max_new_tokens < 0:
        raise RequestError(f"max_new_tokens must be at least 0, got {params.max_new_tokens}")
    if params.temperature < 0:
        raise RequestError(f"temperature must be non-negative, got {params.temperature}")
    if not 0 < params.top_p <= 1:
        raise RequestError(f"top_p must be in (0, 1], got {params.top_p}")
    if params.top_k == 0 or params.top_k < -1:
        raise RequestError(f"top_k must be -1 (disable) or at least 1, got {params.top_k}")
    if params.n < 1:
        raise RequestError(f"n must be at least 1, got {params.n}")
    if any(s == "" for s in params.stop):
        raise RequestError("stop strings must not be empty")
    return params


_FIELDS = {
    "max_new_tokens": "int",
    "temperature": "number",
    "top_p": "number",
    "top_k": "int",
    "stop": "string or list of strings",
    "stop_token_ids": "list of ints",
    "ignore_eos": "bool",
    "skip_special_tokens": "bool",
    "no_stop_trim": "bool",
    "n": "int",
}


def _is(value: object, kind: str) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "string or list of strings":
        return isinstance(value, str) or (isinstance(value, list) and all(isinstance(s, str) for s in value))
    if kind == "list of ints":
        return isinstance(value, list) and all(_is(v, "int") for v in value)
    raise AssertionError(kind)


def filter_top_k_top_p(probs: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Zero the tokens outside the top k and outside the smallest set whose mass reaches top_p, then renormalise.

    A token is kept by top-p when the mass of the tokens ranked strictly above it is below top_p, so the most likely
    token always survives. probs is one row, [vocab].
    """
    if top_k == -1 and top_p >= 1.0:
        return probs
    sorted_probs, order = probs.sort(descending=True)
    keep = torch.ones_like(sorted_probs, dtype=torch.bool)
    if top_k != -1:
        keep[top_k:] = False
    if top_p < 1.0:
        mass_above = sorted_probs.cumsum(0) - sorted_probs
        keep &= mass_above < top_p
    kept = torch.where(keep, sorted_probs, torch.zeros_like(sorted_probs))
    filtered = torch.zeros_like(probs).scatter(0, order, kept)
    return filtered / filtered.sum()


def _tempered(logits: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
    """The logits each row samples from: divided by the row's temperature; greedy rows keep the raw logits."""
    if not any(not p.greedy and p.temperature != 1.0 for p in params):
        return logits
    temperature = torch.tensor([1.0 if p.greedy else p.temperature for p in params], device=logits.device)
    return logits / temperature.unsqueeze(1)


def sampling_logprobs(logits: torch.Tensor, params: list[SamplingParams]) -> torch.Tensor:
    """Each row's log-probs under the distribution it samples from (its temperature; greedy rows the raw logits): what
    choose_tokens reports for the chosen token and top_alternatives for the most likely ones."""
    return torch.log_softmax(_tempered(logits.float(), params), dim=-1)


def top_alternatives(logprobs: torch.Tensor, counts: list[int]) -> list[list[tuple[float, int]] | None]:
    """SGLang's top_logprobs_num: per row of `logprobs` (sampling_logprobs), its `counts[i]` most likely tokens, most
    likely first, as (logprob, token); None for rows asking none."""
    out: list[list[tuple[float, int]] | None] = [None] * len(counts)
    wanted = [i for i, k in enumerate(counts) if k > 0]
    if not wanted:
        return out
    rows = logprobs.index_select(0, torch.tensor(wanted, device=logprobs.device))
    values, tokens = torch.topk(rows, min(max(counts[i] for i in wanted), rows.shape[-1]), dim=-1)
    for j, i in enumerate(wanted):
        k = counts[i]
        out[i] = list(zip(values[j, :k].tolist(), tokens[j, :k].tolist()))
    return out


def choose_tokens(
    logits: torch.Tensor,
    params: list[SamplingParams],
    generators: list[torch.Generator | None],
    logprobs: torch.Tensor | None = None,
) -> tuple[list[int], list[float]]:
    """Pick the next token of every row of logits ([rows, vocab]) and return the tokens with their logprobs.
    `logprobs` is sampling_logprobs(logits, params) when the caller has it already.

    Each row draws one uniform number from its own generator, so a seeded generation samples the same tokens
    whatever else shares its batch; the draw itself is inverse-CDF over the row's (filtered) distribution, done for
    all rows at once.
    """
    logits = logits.float()
    rows, vocab = logits.shape
    if logprobs is None:
        logprobs = sampling_logprobs(logits, params)
    greedy = [i for i in range(rows) if params[i].greedy]
    sampled = [i for i in range(rows) if not params[i].greedy]
    tokens = torch.zeros(rows, dtype=torch.long, device=logits.device)
    if greedy:
        index = torch.tensor(greedy, device=logits.device)
        tokens.index_copy_(0, index, torch.argmax(logits.index_select(0, index), dim=-1))
    if sampled:
        index = torch.tensor(sampled, device=logits.device)
        probs = (logprobs if len(sampled) == rows else logprobs.index_select(0, index)).exp()
        for j, i in enumerate(sampled):
            if params[i].top_k != -1 or params[i].top_p < 1.0:
                probs[j] = filter_top_k_top_p(probs[j], params[i].top_k, params[i].top_p)
        uniform = torch.cat([torch.rand(1, generator=generators[i], device=logits.device) for i in sampled])
        cdf = probs.cumsum(dim=-1)
        targets = (uniform * cdf[:, -1]).unsqueeze(1)
        drawn = torch.searchsorted(cdf, targets, right=True).squeeze(1).clamp(max=vocab - 1)
        tokens.index_copy_(0, index, drawn)
    chosen = logprobs.gather(1, tokens.unsqueeze(1)).squeeze(1)
    return tokens.tolist(), chosen.tolist()
