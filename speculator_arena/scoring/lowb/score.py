"""score_lowb: every measured LowBArena evaluation's LowBScore, axes and gates, from raw rows alone.

The score is a pure function of (the evaluation's raw rows, the LowBArena protocol version): the
rows are read by the queries of sql/ over an in-memory copy (connection.py), the figures computed
by throughput.py, capacity.py, accuracy.py, kl.py and contract.py, the gates by gates.py, and the
score by axes.lowbscore, the function the rules' worked example (example.py) calls. Re-scoring under
another version (`version=N`, staged or published) re-reads nothing but that version's constants;
the speculator arena's scorer (scoring/score.py) and its protocol are untouched by any of this.

Shown, not scored: perplexity_ratio (kl.py), the candidate's declared W/A/KV (lowb_checkpoints),
device_seconds (the candidate's served seconds of this evaluation, engine_starts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from speculator_arena.protocol.lowb import LowbProtocol, is_lowb_task, load_lowb_protocol
from speculator_arena.rules.status import MEASURED, current_frame
from speculator_arena.scoring.lowb import accuracy, capacity, gates, throughput
from speculator_arena.scoring.lowb.axes import geometric_mean, lowbscore, throughput_axis
from speculator_arena.scoring.lowb.connection import SCORED_TABLES, connect, copy_table, sql_text
from speculator_arena.scoring.lowb.contract import tensor_checks
from speculator_arena.scoring.lowb.kl import kl_by_evaluation
from speculator_arena.warehouse.store import Warehouse

IDENTITY = ["evaluation_id", "task_id", "split", "label", "account_id", "is_reference", "solution_kind", "status"]
GATE_COLUMNS = ["evaluation_id", "gate", "check", "statistic", "limit", "verdict", "detail"]
DOMAIN_COLUMNS = ["evaluation_id", "domain", "gated", "n", "drop", "sd", "upper"]


@dataclass
class LowbScores:
    """The frames of one scoring: `evaluations` (one row per measured LowBArena evaluation),
    `gates` (one row per check), `domains` (one row per domain with paired items)."""

    protocol_version: int
    evaluations: pd.DataFrame
    gates: pd.DataFrame
    domains: pd.DataFrame

    @property
    def version(self) -> int:
        """The LowBArena protocol version scored under (board/lowb.py reads this name)."""
        return self.protocol_version


def score_lowb(warehouse: Warehouse, version: int | None = None, evaluation_ids=None) -> LowbScores:
    """Score the measured LowBArena evaluations of `warehouse` (those of `evaluation_ids` when given)
    under LowBArena protocol `version` (the latest when None)."""
    proto = load_lowb_protocol(version)
    con = connect()
    ids = sorted(set(evaluation_ids)) if evaluation_ids is not None else None
    copy_table(con, warehouse, "evaluations", ids)
    ev = current_frame(con.execute(sql_text("evaluations.sql"), {"ids": ids}).df())
    if not ev.empty:
        ev = ev[(ev["status"] == MEASURED) & ev["task_id"].map(is_lowb_task)].reset_index(drop=True)
    scored = list(ev["evaluation_id"]) if not ev.empty else []
    for table in SCORED_TABLES:
        copy_table(con, warehouse, table, scored)
    inputs = _read(con, proto)
    rows, gate_rows, domain_rows = [], [], []
    for e in ev.itertuples(index=False):
        row, g_rows, d_rows = _score_one(e._asdict(), inputs, proto)
        rows.append(row)
        gate_rows += g_rows
        domain_rows += d_rows
    con.close()
    return LowbScores(
        protocol_version=proto.version,
        evaluations=pd.DataFrame(rows, columns=EVALUATION_COLUMNS),
        gates=pd.DataFrame(gate_rows, columns=GATE_COLUMNS),
        domains=pd.DataFrame(domain_rows, columns=DOMAIN_COLUMNS),
    )


def _read(con, proto: LowbProtocol) -> dict[str, dict]:
    """Every query's rows, split by evaluation (one pass over each result)."""
    con.sql(sql_text("item_pairs.sql")).create("item_pairs")
    frames = {
        name: con.execute(sql_text(f"{name}.sql")).df()
        for name in (
            "workload_requests",
            "running_at_once",
            "memory",
            "domain_drops",
            "length_change",
            "kl_prompts",
            "candidate_starts",
            "tensors",
            "checkpoints",
        )
    }
    frames["kl"] = kl_by_evaluation(
        con.sql(sql_text("kl_positions.sql")).to_arrow_table(), proto.accuracy.kl_probability_floor
    )
    out: dict[str, dict] = {}
    for name, f in frames.items():
        if name == "tensors":  # the contract's checks read a frame
            out[name] = {k: g for k, g in f.groupby("evaluation_id", sort=False)}
            continue
        per: dict[str, list[dict]] = {}
        for r in f.to_dict("records"):
            per.setdefault(r["evaluation_id"], []).append(r)
        out[name] = per
    return out


def _one(inputs: dict, name: str, evaluation_id: str):
    """The evaluation's rows of one query (records; a frame for tensors): empty when none."""
    return inputs[name].get(evaluation_id, _EMPTY if name == "tensors" else [])


def _first(inputs: dict, name: str, evaluation_id: str):
    rows = inputs[name].get(evaluation_id)
    return rows[0] if rows else None


_EMPTY = pd.DataFrame(columns=["evaluation_id", "engine", "tensor", "dtype", "shape", "bytes"])


def _score_one(e: dict, inputs: dict, proto: LowbProtocol) -> tuple[dict, list[dict], list[dict]]:
    eid = e["evaluation_id"]
    row = {k: e[k] for k in IDENTITY}
    if e["task_id"] not in proto.tasks:
        row.update({c: math.nan for c in EVALUATION_COLUMNS if c not in row})
        row.update(
            reason="task blank", reason_detail=f"task {e['task_id']} is not in LowBArena protocol p{proto.version}"
        )
        return row, [], []
    task = proto.task(e["task_id"])
    reasons = []

    s, why_s = throughput.speedups(_one(inputs, "workload_requests", eid), proto)
    dl, why_dl = throughput.length_change(_first(inputs, "length_change", eid))
    speed_gmean = geometric_mean(list(s.values()))
    t = throughput_axis(list(s.values()), dl)
    reasons += [why_s, why_dl]

    caps, why = capacity.capacities(_one(inputs, "memory", eid), _one(inputs, "running_at_once", eid), proto)
    p = capacity.capacity(caps)
    reasons.append(why)

    domains = accuracy.domain_rows(eid, _one(inputs, "domain_drops", eid), proto)
    drop, why = accuracy.mean_drop(domains)
    kl_row = _first(inputs, "kl", eid)
    kl = float(kl_row["kl"]) if kl_row is not None else math.nan
    perplexity = float(kl_row["perplexity_ratio"]) if kl_row is not None else math.nan
    distance, a = accuracy.accuracy(drop, kl, proto)
    reasons += [why, None if kl_row is not None else "A: no KL probe position answered by both engines"]

    ckpt = _first(inputs, "checkpoints", eid)
    declared = ckpt["declared_method"] if ckpt is not None else None
    exempt = bool(e["is_reference"]) and e["solution_kind"] in proto.gates.contract.exempt_reference_kinds
    prompts = _first(inputs, "kl_prompts", eid)
    starts = _first(inputs, "candidate_starts", eid)
    x = gates.GateInputs(
        tensor_checks=tensor_checks(_one(inputs, "tensors", eid), declared, exempt, proto),
        kl=kl,
        kl_prompts=None if prompts is None else int(prompts["prompts"]),
        kl_unanswered=None if prompts is None else int(prompts["unanswered"]),
        is_reference=bool(e["is_reference"]),
        candidate_starts=0 if starts is None else int(starts["starts"]),
        privileged_starts=0 if starts is None else int(starts["privileged"]),
        domains=domains,
        speed_gmean=speed_gmean,
        length_change=dl,
        max_drop=proto.max_drop_points(e["task_id"]),
        speed_floor=task.speed_floor,
        speed_blank=why_s,
        length_blank=why_dl,
    )
    checks = gates.gate_rows(x, proto)
    g, reason, detail = gates.verdict(checks, proto)
    score = proto.score.contract_or_engine_rule_score if g == 0 else lowbscore(g, t, p, a, proto.score.axis_exponents)
    if reason is None and math.isnan(score):
        reason, detail = "blank", next(r for r in reasons if r)
    row.update(
        T=t,
        P=p,
        A=a,
        g=g,
        lowbscore=score,
        reason=reason,
        reason_detail=detail,
        s_serve=s.get("serve", math.nan),
        s_interactive=s.get("interactive", math.nan),
        s_long=s.get("long", math.nan),
        speed_gmean=speed_gmean,
        delta_l=dl,
        c_serve=caps.get("serve", {}).get("c", math.nan),
        c_long=caps.get("long", {}).get("c", math.nan),
        c_serve_bf16=caps.get("serve", {}).get("c_bf16", math.nan),
        c_long_bf16=caps.get("long", {}).get("c_bf16", math.nan),
        drop=drop,
        kl=kl,
        D=distance,
        perplexity_ratio=perplexity,
        declared_method=declared,
        declared_weights=None if ckpt is None else ckpt["declared_weights"],
        declared_activations=None if ckpt is None else ckpt["declared_activations"],
        declared_kv=None if ckpt is None else ckpt["declared_kv"],
        device_seconds=math.nan
        if starts is None or pd.isna(starts["served_seconds"])
        else float(starts["served_seconds"]),
    )
    return row, [{"evaluation_id": eid, **r} for r in checks], domains


# The figures every surface shows under a LowBScore (board/lowb.py's rows and JSON read this list).
FIGURE_COLUMNS = [
    "T",
    "P",
    "A",
    "g",
    "lowbscore",
    "reason",
    "reason_detail",
    "s_serve",
    "s_interactive",
    "s_long",
    "speed_gmean",
    "delta_l",
    "c_serve",
    "c_long",
    "c_serve_bf16",
    "c_long_bf16",
    "drop",
    "kl",
    "D",
    "perplexity_ratio",
]
EVALUATION_COLUMNS = [
    *IDENTITY,
    *FIGURE_COLUMNS,
    "declared_method",
    "declared_weights",
    "declared_activations",
    "declared_kv",
    "device_seconds",
]
