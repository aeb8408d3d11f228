"""How numbers are written on the board, in one place, so that the browser test can compute the
text it expects from the warehouse with the same functions the pages use."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

BLANK = "—"


def missing(x: Any) -> bool:
    if x is None or x is pd.NA:
        return True
    try:
        return bool(pd.isna(x))
    except (TypeError, ValueError):
        return False


def num(x: Any, digits: int = 3) -> str:
    return BLANK if missing(x) else f"{float(x):.{digits}f}"


def score(x: Any) -> str:
    """SpecScore, as `board_text` prints it (4 decimals)."""
    return num(x, 4)


def rank(rank: Any, tie: Any) -> str:
    """A board rank: `2=` when another entry shares it (their intervals overlap), BLANK when unranked."""
    from speculator_arena.board.text import rank_label

    return rank_label(None if missing(rank) else rank, False if missing(tie) else tie) or BLANK


def ratio(x: Any) -> str:
    return num(x, 3)


def ms(seconds: Any) -> str:
    """A duration in seconds, shown in milliseconds."""
    return BLANK if missing(seconds) else f"{float(seconds) * 1000:.1f}"


def pct(share: Any) -> str:
    return BLANK if missing(share) else f"{float(share) * 100:.1f}%"


def gib(nbytes: Any) -> str:
    return BLANK if missing(nbytes) else f"{float(nbytes) / (1 << 30):.2f} GiB"


def flag(x: Any) -> str:
    if missing(x):
        return BLANK
    return "FLAGGED" if bool(x) else "ok"


def general(x: Any, digits: int = 4) -> str:
    """A statistic of any scale (gate statistics run from 1e-7 to 1e11)."""
    if missing(x):
        return BLANK
    v = float(x)
    if v == 0:
        return "0"
    if abs(v) < 1e-3 or abs(v) >= 1e6:
        return f"{v:.{digits - 1}e}"
    return f"{v:.{digits}g}"


def text(x: Any) -> str:
    return "" if missing(x) else str(x)


def md_escape(value: Any) -> str:
    """Text safe inside a Markdown table cell (labels are chosen by participants)."""
    s = text(value)
    for ch in "\\`*_{}[]()#+!|<>":
        s = s.replace(ch, "\\" + ch)
    return s.replace("\n", " ")


def md_table(rows: list[dict[str, str]], columns: list[str]) -> str:
    """A GitHub-flavoured Markdown table; cells must already be escaped or be our own links."""
    head = "| " + " | ".join(columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(r.get(c, "") for c in columns) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def finite(x: Any) -> bool:
    return not missing(x) and math.isfinite(float(x))
