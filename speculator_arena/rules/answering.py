"""SCORING.md "Answering", the one home of the rule: in each probe check, an engine that leaves
more than `max_unanswered_share` of the check's requests unanswered fails that gate (the
candidate) or makes the evaluation void (the stock engine). The runner (which voids an
evaluation at once when the stock engine does) and the scorer (which judges every stored
evaluation) both call it."""

from __future__ import annotations

import numpy as np


def over_limit(unanswered, requests, max_share) -> np.ndarray:
    """Whether each check's unanswered share is over the limit (a check with no requests is not)."""
    u, r, m = (np.asarray(np.atleast_1d(x), dtype=float) for x in (unanswered, requests, max_share))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (r > 0) & (u / r > m)
