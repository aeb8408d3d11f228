"""A dev evaluation's per-request rows as Parquet, for anyone who wants to redo the arithmetic
(the evaluation page's download, `GET /api/evaluations/{id}/requests.parquet`).

What it holds is `board/sql/requests_export.sql`: the timed requests' times, tokens, cache hits
and chunk times (the request columns the analysts' database holds for a dev evaluation), whether
each counts under the version read, and its session's family and app; never a reply's text.
A `test` evaluation is refused, here and again in the SQL (which returns no rows for it): its
requests were made from the hidden pool, and their timings, token counts and chunk boundaries
are a trace of hidden text.
"""

from __future__ import annotations

import io
import os
import re

import pandas as pd
import pyarrow.parquet as pq

from speculator_arena.board.data import board_sql, evaluations_index, scoped_connection
from speculator_arena.errors import ArenaError
from speculator_arena.protocol import load_protocol

MEDIA_TYPE = "application/vnd.apache.parquet"


class ExportRefused(ArenaError):
    """Not exported: `status` is the HTTP status the API answers (404 unknown, 403 not dev)."""

    def __init__(self, reason: str, status: int):
        super().__init__(reason)
        self.reason, self.status = reason, status


def file_name(evaluation_id: str, suffix: str = "requests.parquet") -> str:
    """The download's name: the id with anything but letters, digits, `.`, `_` and `-` replaced,
    then `-` and the suffix."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", evaluation_id) + "-" + suffix


def check_exportable(index: pd.DataFrame, evaluation_id: str, what: str = "per-request rows are") -> None:
    """Raise ExportRefused unless the evaluation exists and every one of its rows says `dev`
    (`what` names the refused download: the per-request rows here, the speculation profile in
    profile.py)."""
    rows = index[index["evaluation_id"] == evaluation_id]
    if rows.empty:
        raise ExportRefused(f"no evaluation {evaluation_id!r}", 404)
    if not (rows["split"] == "dev").all():
        raise ExportRefused(
            f"{what} exported for dev evaluations only: a test evaluation's requests come from the hidden pool",
            403,
        )


def requests_parquet(
    home: str | os.PathLike | None,
    evaluation_id: str,
    protocol_version: int | None = None,
    index: pd.DataFrame | None = None,
) -> bytes:
    """The Parquet file's bytes, or ExportRefused."""
    from speculator_arena.warehouse.store import define_scoring_rules

    check_exportable(evaluations_index(home) if index is None else index, evaluation_id)
    with scoped_connection(home, [evaluation_id]) as con:
        define_scoring_rules(con, load_protocol(protocol_version))
        table = con.sql(board_sql("requests_export.sql"), params=[evaluation_id]).to_arrow_table()
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()
