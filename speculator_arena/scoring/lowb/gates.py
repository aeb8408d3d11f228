"""The gates of one evaluation, in the protocol's order, and what they make of g and the reason shown.

Each check is a row (gate, check, statistic, limit, verdict, detail); a verdict is `pass`, `missed`
or `blank` (the rows it needs are missing: neither passed nor missed, the score blank). The gates:
- contract (score 0): the tensor checks (contract.py) and KL <= 0.15 nats per token;
- engine_rules (score 0): every KL probe prompt answered by the candidate, and (non-references)
  every start of the candidate's engine unprivileged;
- accuracy (g 0.1): each gated domain's upper bound on the paired drop <= the tier's max_drop_points
  (under 2 items: missed, "too few items");
- speed (g 0.1): speed_gmean - 1.645 * 0.05 / sqrt(3) >= the task's speed floor;
- length (g 0.1): |dL| <= 0.10.
g = 0 when a zero-score gate is missed, else NaN when a check is blank, else the missed-gate factor
when one is missed, else 1. The reason is the first missed gate in the protocol's order (else the
first blank check's detail).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from speculator_arena.protocol.lowb import LowbProtocol
from speculator_arena.scoring.lowb.axes import speed_gate_statistic


@dataclass(frozen=True)
class GateInputs:
    """What the gates read of one evaluation (figures computed by the other modules)."""

    tensor_checks: list[dict]
    kl: float
    kl_prompts: int | None  # None: no lowb_kl_prompts rows
    kl_unanswered: int | None
    is_reference: bool
    candidate_starts: int
    privileged_starts: int
    domains: list[dict]
    speed_gmean: float
    length_change: float
    max_drop: float
    speed_floor: float
    speed_blank: str | None = None  # why the speed-ups are NaN, when they are
    length_blank: str | None = None  # why dL is NaN, when it is


def _row(gate, check, statistic, limit, verdict, detail) -> dict:
    return {"gate": gate, "check": check, "statistic": statistic, "limit": limit, "verdict": verdict, "detail": detail}


def _at_most(value: float, limit: float) -> str:
    return "blank" if math.isnan(value) else ("pass" if value <= limit else "missed")


def contract(x: GateInputs, proto: LowbProtocol) -> list[dict]:
    limit = proto.gates.contract.max_kl_nats_per_token
    kl = _row("contract", "kl", x.kl, limit, _at_most(x.kl, limit), f"KL {x.kl:.4g} nats per token")
    if math.isnan(x.kl):
        kl["detail"] = "no KL probe position answered by both engines"
    return [*x.tensor_checks, kl]


def engine_rules(x: GateInputs, proto: LowbProtocol) -> list[dict]:
    rules = proto.gates.engine_rules
    rows = []
    if rules.answer_every_kl_prompt:
        if x.kl_prompts is None:
            rows.append(_row("engine_rules", "kl_prompts", None, 0.0, "blank", "no lowb_kl_prompts rows"))
        else:
            ok = x.kl_unanswered == 0
            rows.append(
                _row(
                    "engine_rules",
                    "kl_prompts",
                    float(x.kl_unanswered),
                    0.0,
                    "pass" if ok else "missed",
                    f"{x.kl_unanswered} of {x.kl_prompts} KL prompts unanswered (prompt_logprobs)",
                )
            )
    if rules.unprivileged and not x.is_reference:
        if x.candidate_starts == 0:
            rows.append(
                _row("engine_rules", "unprivileged", None, 0.0, "blank", "no engine_starts rows of the candidate")
            )
        else:
            ok = x.privileged_starts == 0
            detail = f"{x.privileged_starts} of {x.candidate_starts} starts not unprivileged"
            rows.append(
                _row(
                    "engine_rules", "unprivileged", float(x.privileged_starts), 0.0, "pass" if ok else "missed", detail
                )
            )
    return rows


def accuracy(x: GateInputs, proto: LowbProtocol) -> list[dict]:
    gated = [d for d in x.domains if d["gated"]]
    if not gated:
        return [
            _row("accuracy", "items", None, x.max_drop, "blank", "no item of a gated domain answered by both engines")
        ]
    rows = []
    for d in gated:
        if d["n"] < 2:
            rows.append(_row("accuracy", d["domain"], d["upper"], x.max_drop, "missed", f"too few items ({d['n']})"))
            continue
        verdict = _at_most(d["upper"], x.max_drop)
        detail = f"drop {d['drop']:.3g} points, upper bound {d['upper']:.3g} over {d['n']} items"
        rows.append(_row("accuracy", d["domain"], d["upper"], x.max_drop, verdict, detail))
    return rows


def speed(x: GateInputs, proto: LowbProtocol) -> list[dict]:
    s = proto.gates.speed
    stat = speed_gate_statistic(x.speed_gmean, s.z_one_sided, s.noise, s.workloads_root)
    if math.isnan(stat):
        return [_row("speed", "speed", stat, x.speed_floor, "blank", x.speed_blank or "no speed-up")]
    verdict = "pass" if stat >= x.speed_floor else "missed"
    detail = f"gains' geometric mean {x.speed_gmean:.4g} less the margin"
    return [_row("speed", "speed", stat, x.speed_floor, verdict, detail)]


def length(x: GateInputs, proto: LowbProtocol) -> list[dict]:
    limit = proto.gates.length.max_relative_change
    stat = abs(x.length_change)
    if math.isnan(stat):
        return [_row("length", "length", stat, limit, "blank", x.length_blank or "no generated length")]
    return [_row("length", "length", stat, limit, _at_most(stat, limit), f"generated length {x.length_change:+.2%}")]


CHECKS = {"contract": contract, "engine_rules": engine_rules, "accuracy": accuracy, "speed": speed, "length": length}


def gate_rows(x: GateInputs, proto: LowbProtocol) -> list[dict]:
    """Every check row of every gate, in the protocol's order."""
    return [r for gate in proto.gates.order for r in CHECKS[gate](x, proto)]


def verdict(rows: list[dict], proto: LowbProtocol) -> tuple[float, str | None, str | None]:
    """(g, reason, detail) from the check rows (see the module's docstring)."""
    missed = [r for r in rows if r["verdict"] == "missed"]
    blank = [r for r in rows if r["verdict"] == "blank"]
    zero = set(proto.score.zero_score_gates)
    if any(r["gate"] in zero for r in missed):
        g = 0.0  # the score is then the protocol's contract_or_engine_rule_score (score.py)
    elif blank:
        g = math.nan
    elif missed:
        g = proto.score.missed_gate_factor
    else:
        g = 1.0
    if missed:
        return g, missed[0]["gate"], f"{missed[0]['check']}: {missed[0]['detail']}"
    if blank:
        return g, f"{blank[0]['gate']} blank", f"{blank[0]['check']}: {blank[0]['detail']}"
    return g, None, None
