"""What the scorer returns: the `Scores` frames and the names of its gates and figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

GATES = ("greedy_agreement", "sampled_likelihood", "first_choice", "target_fidelity", "length", "memory", "answering")
PROBE_CHECKS = ("greedy_agreement", "sampled_likelihood", "target_fidelity")
ENGINES = ("candidate", "stock")
KEY_FIGURES = (
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "tpot_p50",
    "tpot_p90",
    "tpot_p99",
    "cache_hit_tokens",
    "cache_hit_mean",
    "mean_acceptance_length",
    "draft_acceptance_rate",
    "output_tokens_per_second",
)


@dataclass
class Scores:
    """What score_warehouse returns (columns in docs/scoring.md)."""

    protocol_version: int
    protocol_digest: str
    evaluations: pd.DataFrame
    passes: pd.DataFrame
    gates: pd.DataFrame
    figures: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    # registry.score_and_record: where the convenience copy was written, or why it was not
    copy_path: Path | None = None
    copy_error: str | None = None
    # evaluation_id -> bootstrap interval before widening, where already drawn (the board's memo)
    intervals: dict | None = None
