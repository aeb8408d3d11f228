"""The target tokenizer's arithmetic the item pools need: cut a text to at most n tokens, and
take a window of real text that is exactly n tokens.

Why the target's own tokenizer: the KL probe's `max_prompt_tokens` and the workloads'
`prompt_tokens` are in the target's tokens; a proxy would send prompts of the wrong size.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=4)
def load_tokenizer(directory: str):
    """The tokenizer of a checkpoint directory (offline: the sealed target holds it)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer  # heavy import, only where tokens are counted

    return AutoTokenizer.from_pretrained(str(Path(directory)), local_files_only=True)


def tokenizer_of(tokenizer):
    """A path is loaded; anything else is taken as a tokenizer already."""
    return load_tokenizer(str(tokenizer)) if isinstance(tokenizer, (str, Path)) else tokenizer


def encode(tok, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False))


def cut(tok, text: str, max_tokens: int) -> tuple[str, int]:
    """The text's first tokens, at most `max_tokens` of them once re-read; (text, tokens)."""
    ids = encode(tok, text)
    n = min(len(ids), max_tokens)
    while n > 0:
        piece = tok.decode(ids[:n])
        count = len(encode(tok, piece))
        if count <= max_tokens:
            return piece, count
        n -= count - max_tokens
    return "", 0


def exact_window(tok, ids: list[int], start: int, n: int) -> str | None:
    """Text decoded from `ids` near `start` that re-encodes to exactly `n` tokens, or None.
    A decode/encode round trip can merge or split tokens at the edges, so the window's length
    is corrected a few times, then its start moved."""
    for shift in range(8):
        s = (start + shift) % max(1, len(ids) - n)
        size = n
        for _ in range(6):
            text = tok.decode(ids[s : s + size])
            count = len(encode(tok, text))
            if count == n:
                return text
            size += n - count
            if size <= 0 or s + size > len(ids):
                break
    return None
