"""Token counts of chat prompts without importing litellm (seconds of CPU per process), so that a
replay's forecast table loads no litellm: tiktoken's o200k_base, the encoding litellm's `token_counter`
uses for `gpt-4o` (the forecast's one tokenizer for every model), read from the copy of the file that
litellm's wheel ships (no download), and counted as that function counts a chat prompt: each text in
chunks of 1,024 characters, 3 tokens a message, 1 a name, 3 to prime the reply.
tests/test_forecast.py checks that both counts agree on the workflow's prompts."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

ENCODING = "o200k_base"
CHUNK_CHARS = 1024  # litellm's TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS default
PER_MESSAGE, PER_NAME, REPLY_PRIMER = 3, 1, 3

_encoding = None


def use_shipped_tokenizer() -> str | None:
    """Point TIKTOKEN_CACHE_DIR at the tokenizer files litellm's wheel ships (tiktoken would otherwise
    download them), unless it is set; the folder, or None. Finds litellm without importing it."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return os.environ.get("TIKTOKEN_CACHE_DIR")
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    if folder.is_dir():
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(folder))
    return os.environ.get("TIKTOKEN_CACHE_DIR")


def text_tokens(text: str) -> int:
    global _encoding
    if _encoding is None:
        use_shipped_tokenizer()
        import tiktoken

        _encoding = tiktoken.get_encoding(ENCODING)
    return sum(len(_encoding.encode(text[i:i + CHUNK_CHARS], disallowed_special=()))
               for i in range(0, len(text), CHUNK_CHARS))


def chat_tokens(messages: list[dict]) -> int:
    """A chat prompt's input tokens (string fields only: the workflow's messages have no tools or images)."""
    total = REPLY_PRIMER
    for message in messages:
        total += PER_MESSAGE
        for key, value in message.items():
            if isinstance(value, str):
                total += text_tokens(value) + (PER_NAME if key == "name" else 0)
    return total
