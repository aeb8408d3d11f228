"""SCORING.md "Counted requests", the one home of the rule.

A timed request counts when its stream ended with `data: [DONE]`, its output tokens (counted by
the arena from the returned text) are at most its `max_tokens` plus the protocol's
`count_slack_tokens`, it was sent before its pass ended and it ended by the grace end. Anything
else is a failure of the pass.

Callers: the runner (it draws the likelihood sample from counted replies), the scorer's Parquet
scan (scoring/busy_scan.py) and, for analysts and the rows the scan hands back, the view
`staged_requests` (warehouse/sql/10_staged_requests.sql), which states the same expression over the same
columns; tests/scoring/test_outcomes.py checks the view against this function row for row
(`test_counted_slack_is_the_versions_and_the_view_agrees_with_the_function`).
"""

from __future__ import annotations

import numpy as np


def _floats(x) -> np.ndarray:
    """None/NaN stand for SQL's NULL: every comparison with them is false."""
    return np.asarray(np.atleast_1d(x), dtype=float)


def counted(done, output_tokens, max_tokens, slack, sent_at, ends_at, ended_at, grace_ends_at) -> np.ndarray:
    """Whether each request counts; array-likes (or scalars) of the same length.

    `done`: True only where the stream ended with [DONE] (None/False otherwise); the other
    arguments are numbers, None or NaN for a missing value, which never counts (SQL's
    coalesce(<rule>, false)).
    """
    done = np.atleast_1d(done)
    d = (
        done
        if done.dtype == bool
        else np.array([isinstance(v, (bool, np.bool_)) and bool(v) for v in done], dtype=bool)
    )
    out, mx, sl = _floats(output_tokens), _floats(max_tokens), _floats(slack)
    sent, ends, ended, grace = _floats(sent_at), _floats(ends_at), _floats(ended_at), _floats(grace_ends_at)
    with np.errstate(invalid="ignore"):
        return d & (out <= mx + sl) & (sent < ends) & (ended <= grace)


def counted_row(row: dict, *, slack: int, ends_at: float, grace_ends_at: float) -> bool:
    """The rule for one raw `requests` row of a pass that ends at `ends_at` (grace: `grace_ends_at`)."""
    return bool(
        counted(
            row.get("done") is True,
            row.get("output_tokens"),
            row.get("max_tokens"),
            slack,
            row.get("sent_at"),
            ends_at,
            row.get("ended_at"),
            grace_ends_at,
        )[0]
    )
