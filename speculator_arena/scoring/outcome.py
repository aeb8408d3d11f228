"""The outcome of every evaluation: void, candidate failure, incomplete, a failed or unmeasured gate,
or SpecScore, decided once from the gates' verdicts and the rows (SCORING.md "Outcomes").

Order of precedence for SpecScore (the first that applies decides; SCORING.md "Outcomes": a
measured evaluation ends in a number, 0 with reasons, or void with the reason, never a blank):
1. void (the runner's void_reason, the stock engine unanswered in a probe check, the device
   not idle before the stock engine, the host contended on a timed pass, the stock engine
   without speed on a timed pass) -> blank, "void: ...";
2. the candidate did not start, died, or offloaded -> 0;
3. still running, or a pass of either engine missing or aborted -> blank, "incomplete: ...";
4. a gate fails -> 0 (a gate the candidate left without data fails: the gates say so);
5. a gate not measured (the arena's side: what the candidate causes already failed) -> void,
   except the memory gate on a task that is not public (the local CPU task has no device to
   sample): it is shown "not measured" and does not block;
6. a workload ratio not measured -> void with the passes' reasons;
7. otherwise (r_solo * r_team * r_busy) ** (1/3).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.rules.status import FINAL, VOID
from speculator_arena.scoring import frames
from speculator_arena.scoring.contention import contention_void_reasons
from speculator_arena.scoring.gates.columns import EvaluationRows
from speculator_arena.scoring.result import GATES
from speculator_arena.scoring.rows import ScoringRows


def incomplete_reasons(ev: pd.DataFrame, passes: pd.DataFrame, version: int) -> pd.Series:
    """Why each evaluation cannot be scored yet (None where it can): its task is not in the
    protocol, it is still running, or one of its passes is missing or aborted."""
    missing = passes[passes["missing_reason"].notna()]
    missing_by_eval = missing.groupby("evaluation_id")["pass_id"].apply(lambda s: ", ".join(s))
    listed = ev["evaluation_id"].map(missing_by_eval).to_numpy(dtype=object)
    has_missing = ev["evaluation_id"].isin(missing_by_eval.index).to_numpy()
    running = ~ev["status"].isin(FINAL).to_numpy()
    n = len(ev)
    running_text, missing_text = frames.objects(n), frames.objects(n)
    running_text[running] = [f"incomplete: evaluation is {s}" for s in ev["status"].to_numpy()[running]]
    missing_text[has_missing] = [f"incomplete: passes missing or aborted ({m})" for m in listed[has_missing]]
    reasons = np.select(
        [~ev["in_protocol"].to_numpy(), running, has_missing],
        [frames.objects(n, f"task not in protocol v{version}"), running_text, missing_text],
        None,
    )
    return pd.Series(reasons, index=ev.index, dtype=object)


def decide(
    ev: pd.DataFrame,
    rows: ScoringRows,
    on: EvaluationRows,
    passes: pd.DataFrame,
    blocks: list,
    stock_text: np.ndarray,
    incomplete: np.ndarray,
) -> None:
    """Set each evaluation row's outcome on `ev`: void, void_reason, specscore, specscore_reason,
    gates_pass, failed_gates and not_measured_gates, by the precedence of the module docstring.

    `passes`: the pass ratios (rows.passes); `blocks`: the gates' columns in GATES order and
    `stock_text` the answering gate's void text (gates.evaluate); `incomplete`: each row's
    incomplete reason (None where complete)."""
    n, codes, uniques, first, lim_e, public = len(ev), on.codes, on.uniques, on.first, on.limits, on.public
    starts, contention, timed_passes = rows.starts, rows.contention, rows.timed_passes
    in_protocol = ev["in_protocol"].to_numpy()
    verdicts = np.stack([b["verdict"] for b in blocks])[:, first]  # a repeated id: its first row's
    fails, unmeasured = verdicts == "fail", verdicts == "not measured"
    blocking = unmeasured.copy()
    blocking[GATES.index("memory")] &= public | ~in_protocol
    start_pos = frames.positions(starts, ["evaluation_id", "engine"], (uniques, ("candidate",)))[codes, 0]
    host = contention_void_reasons(
        ev, contention, timed_passes, lim_e, run_records_contention(ev), run_contention_per_workload(ev)
    )
    void_reason = void_reasons(
        ev,
        codes,
        stock_text,
        start_flags(starts, start_pos, "device_not_idle"),
        host,
        stock_without_speed(ev, passes),
    )
    cand_fail = candidate_failures(ev, starts, start_pos)

    # the precedence of the module docstring (its list, in this order): the first case that applies decides
    rs = np.stack([ev[f"r_{w}"].to_numpy(dtype=float) for w in WORKLOADS])
    ratio_blank = np.isnan(rs).any(axis=0)
    void, failed, unfinished, gate_failed, gate_unmeasured, ratio_unmeasured, scored = range(7)
    case = np.select(
        [
            pd.notna(void_reason),
            pd.notna(cand_fail),
            pd.notna(incomplete),
            fails.any(axis=0),
            blocking.any(axis=0),
            ratio_blank,
        ],
        [void, failed, unfinished, gate_failed, gate_unmeasured, ratio_unmeasured],
        scored,
    )
    specscore = np.where((case == failed) | (case == gate_failed), 0.0, np.nan)
    scoring = np.flatnonzero(case == scored)
    specscore[scoring] = [float(p) ** (1.0 / 3.0) for p in np.prod(rs, axis=0)[scoring]]  # Python's pow, as before
    # A measured evaluation never ends blank (SCORING.md "Outcomes"): what is left unmeasured once
    # the candidate's failures are scored 0 is the arena's side, so the evaluation is void.
    ratio_text = frames.objects(n)
    blank_rows = np.flatnonzero(case == ratio_unmeasured)
    if len(blank_rows):
        why = np.stack([ev[f"r_{w}_reason"].to_numpy(dtype=object) for w in WORKLOADS])
        ratio_text[blank_rows] = [
            "ratios not measured: "
            + "; ".join(f"r_{w}: {why[k, i]}" for k, w in enumerate(WORKLOADS) if np.isnan(rs[k, i]))
            for i in blank_rows
        ]
    unmeasured_text = prefixed(
        "gate not measured: ", np.array(frames.joined_names(blocking, GATES, ", "), dtype=object)
    )
    void_reason = np.select(
        [case == void, case == gate_unmeasured, case == ratio_unmeasured],
        [void_reason, unmeasured_text, ratio_text],
        None,
    )
    reason = np.select(
        [case == k for k in (failed, unfinished, gate_failed)],
        [
            prefixed("candidate failed: ", cand_fail),
            incomplete,
            prefixed("gate failed: ", np.array(frames.joined_names(fails, GATES, ", "), dtype=object)),
        ],
        prefixed("void: ", void_reason),
    )
    ev["void"] = pd.notna(void_reason).tolist()
    ev["void_reason"] = [x if x is not None else y for x, y in zip(void_reason, ev["void_reason"].to_numpy())]
    ev["specscore"] = pd.array(specscore, dtype=float)
    ev["specscore_reason"] = reason.tolist()
    ev["gates_pass"] = pd.arrays.BooleanArray(case == scored, ~np.isin(case, (gate_failed, scored)))
    ev["failed_gates"] = frames.joined_names(fails, GATES, ",")
    ev["not_measured_gates"] = frames.joined_names(unmeasured, GATES, ",")


def run_flags(ev: pd.DataFrame, flag) -> np.ndarray:
    """Per row: `flag(version, task_id)` of the protocol version the evaluation ran under and its
    task, False where that version is no longer present (a staged version: not judged on absence)."""
    from speculator_arena.protocol import load_protocol

    known: dict = {}
    for (v, task_id), _ in ev.groupby(["run_protocol_version", "task_id"], dropna=True):
        try:
            known[v, task_id] = bool(flag(load_protocol(int(v)), task_id))
        except (KeyError, ValueError):
            known[v, task_id] = False
    return np.array(
        [known.get((v, t), False) for v, t in zip(ev["run_protocol_version"].to_numpy(), ev["task_id"].to_numpy())],
        dtype=bool,
    )


def run_records_contention(ev: pd.DataFrame) -> np.ndarray:
    """Per row: whether the protocol version the evaluation ran under recorded host contention."""
    return run_flags(ev, lambda proto, _task: proto.contention is not None)


def run_contention_per_workload(ev: pd.DataFrame) -> np.ndarray:
    """Per row: whether the version the evaluation ran under judges its host contention over each
    workload's passes pooled (the interleaved pairing's `interleaving.contention_per_workload`)."""

    def pooled(proto, task_id):
        inter = proto.task(task_id).interleaving
        return inter is not None and inter.contention_per_workload

    return run_flags(ev, pooled)


def stock_without_speed(ev: pd.DataFrame, passes: pd.DataFrame) -> np.ndarray:
    """Per row: the timed passes on which the stock engine had no speed (it counted no tokens in
    its window), which voids the evaluation (the arena's side); None where there is none."""
    out = frames.objects(len(ev))
    if not len(passes):
        return out
    bad = (
        passes["missing_reason"].isna()
        & ~passes["zeroed_by_failure_rule"].fillna(False).astype(bool)
        & ~(passes["stock_speed"] > 0)
    )
    listed = passes[bad].groupby("evaluation_id")["pass_id"].apply(lambda s: ", ".join(s))
    hit = ev["evaluation_id"].map(listed).to_numpy(dtype=object)
    has = pd.notna(hit)
    out[has] = [f"the stock engine counted no tokens in its window on {p}" for p in hit[has]]
    return out


def void_reasons(
    ev: pd.DataFrame,
    codes: np.ndarray,
    stock_text: np.ndarray,
    not_idle: np.ndarray,
    host: np.ndarray,
    stock_speed: np.ndarray,
) -> np.ndarray:
    """Why each evaluation is void (None where it is not): the runner voided it, the stock engine
    left probe requests unanswered (the last row of a repeated id that did decides), the device
    did not come back idle before the stock engine, the host was contended, or the stock engine
    had no speed on a timed pass."""
    n = len(ev)
    runner = (ev["status"] == VOID).to_numpy(dtype=bool, na_value=False)
    given = ev["void_reason"].to_numpy()
    runner_text = frames.objects(n)
    runner_text[runner] = [x if isinstance(x, str) and x else "voided by the runner" for x in given[runner]]
    by_id = {int(codes[i]): stock_text[i] for i in np.flatnonzero(pd.notna(stock_text))}
    stock = np.array([by_id.get(c) for c in codes.tolist()], dtype=object) if by_id else frames.objects(n)
    return np.select(
        [runner, pd.notna(stock), not_idle, pd.notna(host), pd.notna(stock_speed)],
        [
            runner_text,
            stock,
            frames.objects(n, "device did not come back idle before the stock engine"),
            host,
            stock_speed,
        ],
        None,
    )


def candidate_failures(ev: pd.DataFrame, starts: pd.DataFrame, start_pos: np.ndarray) -> np.ndarray:
    """Why the candidate failed (None where it did not): the runner's failure_reason, its engine
    died, or its start-up log shows an offload."""
    n = len(ev)
    given = ev["failure_reason"].to_numpy(dtype=object) if "failure_reason" in ev.columns else frames.objects(n)
    stated = np.array([isinstance(x, str) for x in given], dtype=bool)
    offload = start_flags(starts, start_pos, "offload")
    offload_text = frames.objects(n)
    if offload.any():
        evidence = starts["offload_evidence"].to_numpy(dtype=object)[start_pos[offload]]
        offload_text[offload] = ["offload in the candidate's start-up log (" + str(x) + ")" for x in evidence]
    return np.select(
        [stated, start_flags(starts, start_pos, "died"), offload],
        [given, frames.objects(n, "candidate engine died"), offload_text],
        None,
    )


def start_flags(starts: pd.DataFrame, pos: np.ndarray, col: str) -> np.ndarray:
    """A start flag of the candidate per row: False where it has no start row or the flag is blank."""
    out = np.zeros(len(pos), dtype=bool)
    found = pos >= 0
    if found.any():
        values = starts[col].to_numpy(dtype=object)[pos[found]]
        blank = starts[col].isna().to_numpy()[pos[found]]
        out[found] = [not b and bool(v) for v, b in zip(values, blank)]
    return out


def prefixed(prefix: str, texts: np.ndarray) -> np.ndarray:
    """`prefix + text` where a text is given, None elsewhere."""
    out = frames.objects(len(texts))
    has = pd.notna(texts)
    out[has] = [prefix + t for t in texts[has]]
    return out
