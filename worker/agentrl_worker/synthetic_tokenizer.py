"""Writes the 64-token tokenizer of the CPU demo (examples/cpu-demo.yaml): tokenizer.json + tokenizer_config.json with
a ChatML chat template that renders tools and tool calls in the Qwen 2.5 / Hermes format.

    python -m agentrl_worker.synthetic_tokenizer --out DIR [--tool-name open_vault]

Then `python -m agentrl_worker.make_tiny --tokenizer DIR ...` builds a random-init model on it.

Why this shape:
- 64 tokens exactly: make_tiny rounds the embedding up to a multiple of 64, and a random-init model samples every row
  of it, so any row without a token would be sampled (and rejected) a third of the time.
- The whole tool-call body `\\n{"name": "<tool>", "arguments": {}}\\n` is ONE added token, so a random policy writes
  `<tool_call>` BODY `</tool_call>` with a chance of 1/64 per token instead of never, and the template's own render of
  a parsed call re-tokenizes to exactly the tokens sampled (no drift).
- Everything else is one character per token (BPE with no merges, Fuse decoder), so decode(encode(text)) == text and
  any text the model writes re-tokenizes to the same ids. There is no unknown token on purpose: `<unk>` decodes to
  five characters that re-tokenize differently, so sampling it would break the drift check; the demo's texts use
  only the characters below.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

VOCAB_SIZE = 64
SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
# Added but not `special`, as in Qwen's tokenizer: skip_special_tokens keeps them, so rewards can see tool calls.
DELIMITERS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>")
ROLES = ("system", "user", "assistant")
PUNCTUATION = ("\n", " ", "{", "}", '"', ":", ",", "?", "!", "[", "]", ".", "_", "-", "'")
DIGITS = tuple("0123456789")
LETTERS = tuple("abcdefghijklmnopqrstuvwxyz")

CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n' }}{%- endif %}"
    "{{- '<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools><|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if message.content %}{{- message.content }}{%- endif %}"
    "{%- if message.tool_calls %}{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": \"' + tool_call.name + '\", \"arguments\": ' }}"
    "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def call_body(tool_name: str) -> str:
    """The text between `<tool_call>` and `</tool_call>` that the template writes for a call with no arguments."""
    return '\n{"name": "' + tool_name + '", "arguments": {}}\n'


def build_tokenizer(tool_name: str):
    """The `tokenizers.Tokenizer`: single characters in the model, structure as added tokens; exactly 64 ids."""
    from tokenizers import AddedToken, Tokenizer, decoders, models

    added = [*SPECIAL, *DELIMITERS, *ROLES, call_body(tool_name)]
    chars = [*PUNCTUATION, *DIGITS, *LETTERS]
    if len(chars) + len(added) != VOCAB_SIZE:
        raise ValueError(f"the demo vocabulary must have {VOCAB_SIZE} tokens, got {len(chars) + len(added)}")
    missing = sorted(set(tool_name) - set(chars))
    if missing:
        raise ValueError(f"tool name {tool_name!r} uses characters outside the vocabulary: {missing}")
    tokenizer = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(chars)}, merges=[]))
    tokenizer.decoder = decoders.Fuse()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in added[len(SPECIAL):]])
    if tokenizer.get_vocab_size(with_added_tokens=True) != VOCAB_SIZE:
        raise AssertionError("vocabulary size changed while adding tokens")
    return tokenizer


def tokenizer_config(tokenizer) -> dict:
    decoder = {}
    for token_id, token in sorted(tokenizer.get_added_tokens_decoder().items()):
        decoder[str(token_id)] = {
            "content": token.content,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": token.special,
        }
    return {
        "added_tokens_decoder": decoder,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 4096,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def write_tokenizer(out: str | Path, tool_name: str = "open_vault") -> Path:
    """Writes tokenizer.json and tokenizer_config.json into `out` (created) and returns it."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(tool_name)
    tokenizer.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(tokenizer), indent=2, ensure_ascii=False) + "\n")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agentrl_worker.synthetic_tokenizer", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for tokenizer.json and tokenizer_config.json")
    parser.add_argument("--tool-name", default="open_vault", help="the tool whose no-argument call is one token")
    args = parser.parse_args(argv)
    print(write_tokenizer(args.out, args.tool_name))


if __name__ == "__main__":
    main()
