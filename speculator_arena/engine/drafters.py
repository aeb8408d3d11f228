"""Draft proposals: n-gram prompt lookup (point-mass drafts) and the self-draft's sampled drafts."""

from __future__ import annotations

import numpy as np


def ngram_lookup(context: list[int] | np.ndarray, k: int, n_max: int = 3, n_min: int = 1) -> list[int]:
    """Prompt lookup decoding: find the longest suffix n-gram (n_max down to n_min) of `context`
    that occurred earlier, and propose the up-to-k tokens that followed its latest earlier
    occurrence. An empty list means no proposal (the engine then decodes one token plainly)."""
    arr = np.asarray(context, dtype=np.int64)
    size = len(arr)
    for n in range(min(n_max, size - 1), n_min - 1, -1):
        pattern = arr[size - n :]
        windows = np.lib.stride_tricks.sliding_window_view(arr[: size - 1], n)
        hits = np.flatnonzero(np.all(windows == pattern, axis=1))
        if hits.size:
            start = int(hits[-1]) + n
            follow = arr[start : start + k]
            if follow.size:
                return [int(t) for t in follow]
    return []
