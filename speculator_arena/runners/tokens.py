"""Token counting with the target's own tokenizer.

Why the arena counts tokens itself: an engine's `usage` is its own claim (section 9, "report
fake counts"), so output tokens are the tokens of the returned text, and the tokens of a
stream are attributed to its chunks by character spans, which is what the busy-window speed
of SCORING.md needs.
"""

from __future__ import annotations

import bisect
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=4)
def load_tokenizer(path: str):
    """The target's tokenizer from its directory (offline: the arena never fetches it)."""
    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(f"tokenizer directory not found: {path}")
    from transformers import AutoTokenizer  # heavy import, only where tokens are counted

    return AutoTokenizer.from_pretrained(str(p), local_files_only=True)


def count_tokens(tokenizer, text: str) -> int:
    if not text:
        return 0
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def token_ids(tokenizer, text: str) -> list[int]:
    if not text:
        return []
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def attribute_chunks(tokenizer, chunk_texts: list[str]) -> tuple[int, list[int]]:
    """Tokens of the joined reply, and how many of them each chunk completed.

    A token belongs to the chunk holding its last character: that is when a reader of the
    stream has the whole token. Chunks that complete no token get 0, so the counts always sum
    to the reply's token count.
    """
    text = "".join(chunk_texts)
    if not text:
        return 0, [0] * len(chunk_texts)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ends = []  # character offset where each chunk ends (exclusive)
    pos = 0
    for c in chunk_texts:
        pos += len(c)
        ends.append(pos)
    counts = [0] * len(chunk_texts)
    for start, end in enc["offset_mapping"]:
        last_char = max(end - 1, start)
        i = bisect.bisect_right(ends, last_char)
        counts[min(i, len(counts) - 1)] += 1
    return len(enc["input_ids"]), counts
