"""The CPU demo's 64-token tokenizer (agentrl_worker.synthetic_tokenizer) as transformers and make_tiny see it."""

from __future__ import annotations

from agentrl_worker.make_tiny import make_tiny
from agentrl_worker.synthetic_tokenizer import VOCAB_SIZE, call_body, write_tokenizer


def test_transformers_renders_and_tokenizes_a_tool_conversation(tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(write_tokenizer(tmp_path / "tok"))
    assert len(tokenizer) == VOCAB_SIZE
    tools = [{"type": "function", "function": {"name": "open_vault", "description": "open the vault and read its code",
                                               "parameters": {"type": "object", "properties": {}, "required": []}}}]
    messages = [
        {"role": "user", "content": "what is the code of vault ym?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "open_vault", "arguments": {}}}]},
        {"role": "tool", "content": "7"},
        {"role": "assistant", "content": "7"},
    ]
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    assert "<tool_call>" + call_body("open_vault") + "</tool_call><|im_end|>" in text
    assert "<|im_start|>user\n<tool_response>\n7\n</tool_response><|im_end|>\n<|im_start|>assistant\n7<|im_end|>\n" in text
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert tokenizer.decode(ids) == text  # one character per token, structure as added tokens: lossless
    call = tokenizer.encode("<tool_call>" + call_body("open_vault") + "</tool_call>", add_special_tokens=False)
    assert tokenizer.convert_ids_to_tokens(call) == ["<tool_call>", call_body("open_vault"), "</tool_call>"]
    assert tokenizer.decode(ids, skip_special_tokens=True).count("<tool_response>") == 1  # kept, like Qwen's


def test_make_tiny_sizes_the_embedding_to_exactly_the_vocabulary(tmp_path):
    import json

    out = make_tiny(write_tokenizer(tmp_path / "tok"), layers=1, hidden=32, out=tmp_path / "model")
    config = json.loads((out / "config.json").read_text())
    assert config["vocab_size"] == VOCAB_SIZE  # no embedding row without a token for a random policy to sample
    assert (out / "tokenizer.json").exists()
