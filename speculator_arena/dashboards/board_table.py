"""The ranked table of the board, as Markdown rows (numbers stay in the page's text, unlike
`st.dataframe`, which draws on a canvas; the browser test reads them). The rank is the shared
one of board/ranking.py (`2=`: another entry's interval overlaps), beside each SpecScore its
95% interval (scoring/intervals.py).

The table is narrow enough to read without scrolling sideways at 1,400 px (the browser test
checks it): rank, entry, SpecScore [interval], the three ratios and one status cell. The
candidate's TTFT and TPOT percentiles, cache hit and acceptance are on each evaluation's page
and in the board's CSV download (`EXPORT_FIGURES`, board_view.rows_csv)."""

from __future__ import annotations

import pandas as pd

from speculator_arena.board.text import interval_label
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.dashboards.links import evaluation_md
from speculator_arena.scoring.result import ENGINES, KEY_FIGURES

SCORE = "SpecScore [95% interval]"
COLUMNS = ["#", "Participant", "Account", SCORE, "r solo", "r team", "r busy", "Status"]
REFERENCE_COLUMNS = ["#", "Reference", SCORE, "r solo", "r team", "r busy", "Status"]

# The figures the board's rows carry beyond its table: in the CSV download, every one of them.
EXPORT_FIGURES = [f"{engine}_{figure}" for engine in ENGINES for figure in KEY_FIGURES]


def gates_cell(row) -> str:
    failed = fmt.text(row.get("failed_gates"))
    not_measured = fmt.text(row.get("not_measured_gates"))
    passed = row.get("gates_pass")
    if failed:
        return "fail: " + fmt.md_escape(failed.replace(",", ", "))
    if not fmt.missing(passed) and bool(passed):
        return "pass" + (f" (not measured: {fmt.md_escape(not_measured.replace(',', ', '))})" if not_measured else "")
    if not_measured:
        return "not measured: " + fmt.md_escape(not_measured.replace(",", ", "))
    return fmt.BLANK


def status_cell(row) -> str:
    """The gates, why the entry has no (or a zero) SpecScore when it says more than the gates do,
    and the dev/test gap flag when raised."""
    parts = []
    gates = gates_cell(row)
    if gates != fmt.BLANK:
        parts.append(gates)
    reason = fmt.text(row.get("specscore_reason"))
    if reason and not (fmt.text(row.get("failed_gates")) and reason.startswith("gate failed")):
        parts.append(fmt.md_escape(reason))
    gap = row.get("gap_flag")
    if not fmt.missing(gap) and bool(gap):
        parts.append("dev/test gap " + fmt.flag(gap))
    return "; ".join(parts) or fmt.BLANK


def score_cell(row) -> str:
    """`1.3904 [1.373, 1.408]`, as `arena board --text` writes it; the SpecScore alone when it has no interval."""
    interval = interval_label(row.get("interval_low"), row.get("interval_high"))
    return fmt.score(row.get("specscore")) + (f" {interval}" if interval else "")


def row_cells(row: dict, protocol_version: int | None, label_column: str = "Participant") -> dict[str, str]:
    return {
        "#": fmt.rank(row.get("rank"), row.get("tie")),
        label_column: evaluation_md(fmt.text(row.get("label")), str(row["evaluation_id"]), protocol_version),
        "Account": fmt.md_escape(row.get("account_id")),
        SCORE: score_cell(row),
        "r solo": fmt.ratio(row.get("r_solo")),
        "r team": fmt.ratio(row.get("r_team")),
        "r busy": fmt.ratio(row.get("r_busy")),
        "Status": status_cell(row),
    }


def markdown(rows: pd.DataFrame, protocol_version: int | None, label_column: str = "Participant") -> str:
    """Participants' rows with their accounts; references' (`label_column="Reference"`) without."""
    cols = COLUMNS if label_column == "Participant" else REFERENCE_COLUMNS
    cols = [label_column if c in ("Participant", "Reference") else c for c in cols]
    cells = [row_cells(r, protocol_version, label_column) for r in rows.to_dict("records")]
    return fmt.md_table(cells, cols)


CHART_PARTICIPANTS = 25  # participants drawn in the board's picture (the best ranked); the table lists all


def interval_rows(rows: pd.DataFrame, limit: int | None = None) -> pd.DataFrame:
    """The picture's rows (charts.board_intervals): the ranked entries of `rows` (board_rows,
    one section), in the board's order, the first `limit` of them, each with the labels the
    table writes (its rank, SpecScore [interval]). Entries not ranked (a missed gate, no
    SpecScore) are in the table only."""
    ranked = rows[rows["ranked"].fillna(False).astype(bool)]
    if limit is not None:
        ranked = ranked.head(limit)
    ranked = ranked.reset_index(drop=True)
    out = pd.DataFrame(
        {
            "section": ranked["section"].astype(str),
            "rank": pd.Series([fmt.rank(r, t) for r, t in zip(ranked["rank"], ranked["tie"], strict=True)], dtype=str),
            "label": ranked["label"].map(fmt.text),
            "account_id": ranked["account_id"].map(fmt.text),
            "evaluation_id": ranked["evaluation_id"].astype(str),
            "specscore": ranked["specscore"].astype(float),
            "interval_low": ranked["interval_low"].astype(float),
            "interval_high": ranked["interval_high"].astype(float),
            "score_text": [score_cell(r) for r in ranked.to_dict("records")],
        }
    )
    entry = out["rank"].astype(str) + "  " + out["label"].astype(str)
    dup = entry.duplicated(keep=False)  # two entries of one label: told apart by account, then id
    entry[dup] = entry[dup] + " (" + out.loc[dup, "account_id"] + ")"
    dup = entry.duplicated(keep=False)
    entry[dup] = entry[dup] + " " + out.loc[dup, "evaluation_id"]
    out.insert(0, "entry", entry)
    out.insert(0, "order", range(len(out)))
    return out


def intervals_caption(noise: dict) -> str:
    """What the interval is, and the noise they are widened by (board/ranking.py `board_noise`)."""
    widened = (
        f"widened on each side by the task's calibrated max A/A error {noise['max_abs_error']:.3f} "
        "(low × (1 − e), high × (1 + e))"
        if noise["calibrated"]
        else "not widened: the max A/A error is not calibrated for this task"
    )
    return (
        "The interval: a seeded bootstrap 95% interval of the SpecScore (1,000 resamples of its passes "
        f"within each workload), {widened}. Rank = 1 + the number of entries whose interval lies entirely "
        "above this one's, so entries within each other's noise share a rank, written 2=."
    )


def show_aa_check(st, noise: dict) -> None:
    """Beside the references: the A/A reference against the calibrated noise, flagged when outside."""
    text = "A/A check: " + fmt.md_escape(noise["note"])
    if noise["aa_flag"]:
        st.warning(text)
    else:
        st.caption(text)
