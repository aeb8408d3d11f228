"""Column-at-a-time helpers of the scorer's pandas step (assemble.py, figures.py).

Why: assembling gates and figures one evaluation at a time (`.at`, `iterrows`, a boolean mask
per evaluation) cost seconds at 870 evaluations, on the board's first render. These helpers
turn a query's rows into arrays aligned with the evaluations, with one hashed lookup per
frame, and build the text columns the way pandas would have inferred them row by row, so the
result is the same frame, value for value and dtype for dtype.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def positions(frame: pd.DataFrame, key_cols, labels, repeated: str = "raise") -> np.ndarray:
    """Row position in `frame` of every combination of `labels` (one label list per key column),
    shaped like the combinations (e.g. evaluations x engines); -1 where `frame` has no such row.

    Why: one hashed lookup per frame instead of one `.at` per evaluation. The queries return one
    row per key; a key found in two rows raises (a query that repeats a key is a bug), unless
    `repeated="absent"`, where it reads as absent (an ambiguous count is no count).
    """
    shape = tuple(len(x) for x in labels)
    out = np.full(shape, -1, dtype=np.intp)
    if len(frame) == 0:
        return out
    codes = [
        (lab if isinstance(lab, pd.Index) else pd.Index(lab)).get_indexer(frame[col])
        for col, lab in zip(key_cols, labels)
    ]
    rows = np.flatnonzero(np.logical_and.reduce([c >= 0 for c in codes]))
    flat = np.ravel_multi_index(tuple(c[rows] for c in codes), shape)
    if repeated == "absent":
        once = ~frame.duplicated(list(key_cols), keep=False).to_numpy()[rows]
        rows, flat = rows[once], flat[once]
    elif len(np.unique(flat)) < len(flat):
        raise ValueError(f"more than one row per ({', '.join(key_cols)}) in a scoring query's result")
    out.reshape(-1)[flat] = rows
    return out


def take(values, pos, fill=np.nan) -> np.ndarray:
    """`values[pos]`, `fill` where `pos` is -1 (absent)."""
    values = np.asarray(values)
    if len(values) == 0:
        return np.full(np.shape(pos), fill, dtype=float if values.dtype != object else object)
    return np.where(pos >= 0, values[np.maximum(pos, 0)], fill)


def floats(col: pd.Series) -> np.ndarray:
    """A column as float64, NaN for blanks and non-numbers (what the gates frame's to_numeric made of it)."""
    return pd.to_numeric(col, errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def objects(n: int, text=None) -> np.ndarray:
    """An object array of `n` copies of `text` (texts and None are built in object arrays, never '<U')."""
    out = np.empty(n, dtype=object)
    out[:] = text
    return out


def inferred(values):
    """The column pandas infers from these Python values, as when a frame is built row by row.

    Why: the output's dtypes are what pandas infers (str, with NaN for None, for texts; object
    when every value is None); columns built from arrays must get the same.
    """
    return pd.Series(list(values), dtype=None).array


def by_row(rows: np.ndarray, items) -> dict:
    """{row: [its items, in their order]} (rows: one per item)."""
    groups: dict = {}
    for r, item in zip(rows.tolist(), items):
        groups.setdefault(r, []).append(item)
    return groups


def texts_by_row(n: int, groups: dict, make) -> np.ndarray:
    """Per row 0..n-1, `make(items)` of the rows in `groups`; None for the others."""
    out = objects(n)
    for r, items in groups.items():
        out[r] = make(items)
    return out


def joined_names(flags: np.ndarray, names, sep: str) -> list:
    """Per column of `flags` (names x rows), `sep`.join of the names flagged, in `names` order.

    Why: a row's set of flagged gates is one of few; each distinct set is joined once."""
    bits = (flags.astype(np.int64) << np.arange(len(names))[:, None]).sum(axis=0)
    text = {b: sep.join(nm for k, nm in enumerate(names) if b >> k & 1) for b in np.unique(bits).tolist()}
    return [text[b] for b in bits.tolist()]


def eval_keys(eids: pd.Series):
    """Each row's evaluation code, the distinct ids, and per row the first and the last row with its id.

    Why first and last: the gate verdicts of a repeated id were read through a pivot (its first row
    wins) and the figures' inputs through dicts (its last row wins); repeated ids keep that.
    """
    codes, uniques = pd.factorize(eids, use_na_sentinel=False)
    _, first = np.unique(codes, return_index=True)
    _, last_reversed = np.unique(codes[::-1], return_index=True)
    last = len(codes) - 1 - last_reversed
    return codes, pd.Index(uniques), first[codes], last[codes]
