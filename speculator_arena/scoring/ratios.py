"""The workload ratios r_solo, r_team, r_busy of every evaluation (SCORING.md "Ratios and
SpecScore"): the median of its passes' ratios (sql/pass_ratios.sql), blank with the passes'
reasons when any pass's ratio is blank.
"""

from __future__ import annotations

import pandas as pd

from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.scoring import frames


def workload_ratios(ev: pd.DataFrame, passes: pd.DataFrame) -> None:
    """r_solo, r_team, r_busy: the median over passes; blank, with the passes' reasons, when any pass is."""
    if len(passes):
        g = passes.groupby(["evaluation_id", "workload"])
        wr = pd.DataFrame({"median": g["ratio"].median(), "n": g["ratio"].size(), "valid": g["ratio"].count()})
        wr["reason"] = blank_ratio_reasons(passes, wr)
    else:
        wr = pd.DataFrame(
            columns=["median", "n", "valid", "reason"],
            index=pd.MultiIndex.from_tuples([], names=["evaluation_id", "workload"]),
        )
    for w in WORKLOADS:
        sub = wr.xs(w, level="workload") if len(wr) else wr.iloc[:0]
        ok = sub["valid"] == sub["n"]
        ev[f"r_{w}"] = ev["evaluation_id"].map(sub["median"].where(ok))
        reason = sub["reason"].where(~ok)
        ev[f"r_{w}_reason"] = ev["evaluation_id"].map(reason)
        ev.loc[ev[f"r_{w}"].isna() & ev[f"r_{w}_reason"].isna(), f"r_{w}_reason"] = "no pass rows"


def blank_ratio_reasons(passes: pd.DataFrame, wr: pd.DataFrame) -> pd.Series:
    """Per (evaluation, workload) with a blank pass ratio: its passes' distinct reasons, sorted and
    joined ("" when none is given); NaN for the others (never shown).

    Why only those: joining every group's reasons in Python cost more than the rest of the ratios."""
    blank = wr.index[(wr["valid"] != wr["n"]).to_numpy()]
    out = frames.objects(len(wr))
    if len(blank):
        in_blank = pd.MultiIndex.from_frame(passes[["evaluation_id", "workload"]]).isin(blank)
        sub = passes[in_blank]
        seen: dict = {}
        for key, r in zip(zip(sub["evaluation_id"].tolist(), sub["workload"].tolist()), sub["ratio_reason"].to_numpy()):
            entry = seen.setdefault(key, set())
            if isinstance(r, str):
                entry.add(r)
        where = wr.index.get_indexer(list(seen))
        out[where] = ["; ".join(sorted(s)) for s in seen.values()]
    return pd.Series(out, index=wr.index, dtype="str")
