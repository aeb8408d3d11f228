"""Acceptance as the context grows (shown, never scored): acceptance length against the prompt's
length (binned in powers of two) and against the turn within a session, agent and chat families
apart, per workload and over all three.

Why from the stream: acceptance against prompt length or turn needs acceptance per request. The
engine's counters (`vllm:spec_decode_*`) are read around each pass, so they hold one number per
pass, whatever the prompts in it; no engine the arena runs reports acceptance per request in what
the runner stores. What the arena has per request is its own count of each streamed chunk, so
acceptance length here is tokens per chunk (SCORING.md: "From chunks: tokens per chunk, per
request (exact only for engines that stream one chunk per step)"), and every row says so in
`source`. Two means are given: per chunk (Σ tokens / Σ chunks over the bin's requests, the
per-step mean when one chunk is one step) and per request (the mean of each request's tokens per
chunk), as Model-Optimizer's profile gives its mean per step and per request.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.board.acceptance import family_splits
from speculator_arena.board.shown import ShownRows

AXES = ("prompt_tokens", "turn")
SOURCE = "tokens per chunk per request (the arena's count; exact only for engines that stream one chunk per step)"
WHY_NOT_COUNTERS = (
    "the engine reports no acceptance per request, and its counters are read around each pass, "
    "so they cannot be split by prompt length or turn"
)
CONTEXT_COLUMNS = [
    "evaluation_id",
    "engine",
    "workload",
    "family",
    "axis",
    "bin_low",
    "bin_high",
    "requests",
    "chunks",
    "tokens",
    "acceptance_length",
    "acceptance_length_per_request",
    "source",
    "reason",
]
_SUMS = ["requests", "chunks", "tokens", "ratio_sum"]


def by_context(rows: ShownRows) -> pd.DataFrame:
    """Per evaluation, engine and workload (and 'all'), family and axis: one row per bin with its
    acceptance length (tokens per chunk, per chunk and per request) and the source it was read
    from; a workload whose figure cannot be shown is one row with the reason (a counted request
    without chunk times or without its sessions row, or the blank rule)."""
    out = []
    for key, c, why in family_splits(rows, rows.context):
        if why is not None:
            out.append((*key, None, None, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, np.nan, SOURCE, why))
            continue
        g = c.groupby(["family", "axis", "bin_low", "bin_high"])[_SUMS].sum().reset_index()
        for r in g.itertuples():
            out.append(
                (
                    *key,
                    r.family,
                    r.axis,
                    int(r.bin_low),
                    int(r.bin_high),
                    int(r.requests),
                    int(r.chunks),
                    int(r.tokens),
                    r.tokens / r.chunks,
                    r.ratio_sum / r.requests,
                    SOURCE,
                    None,
                )
            )
    return pd.DataFrame(out, columns=CONTEXT_COLUMNS)
