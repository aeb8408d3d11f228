"""A calibration's product: the protocol candidate (vN+1) and its evidence.

The candidate is the base version's document with the task's calibrated values replaced (its
limits, speed noise, dev/test gap and, from the m/c fit, its interleave and think-time scale).
It is written under `$ARENA_HOME/calibration/<task>/v<N>/` (candidate.yaml, evidence.json,
evidence.md, plots/) and is not a version: `load_protocol()` never sees it until an operator
publishes it (calibration/publish.py).

The evidence's verdicts are the scorer's own: the runs are scored under the candidate document
(`score_warehouse(document=...)`), so "caught" means exactly what it will mean once published.
"""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path

import pandas as pd
import yaml

from speculator_arena.calibration.derive import BOUND_GATES, beyond, derive
from speculator_arena.calibration.plan import Plan
from speculator_arena.protocol.model import Protocol
from speculator_arena.protocol.version_files import version_path
from speculator_arena.warehouse import Warehouse

CALIBRATED_GATES = ("greedy_agreement", "sampled_likelihood", "first_choice", "target_fidelity")
LIMIT_OF_GATE = {
    "greedy_agreement": "greedy_agreement_floor",
    "sampled_likelihood": "likelihood_bound",
    "first_choice": "first_choice_bound",
    "target_fidelity": "fidelity_ceiling",
}
UNPUBLISHED = "candidate (not published)"


def candidate_dir(home, task_id: str, version: int) -> Path:
    return Path(home) / "calibration" / task_id / f"v{version}"


def candidate_versions(home, task_id: str | None = None) -> list[tuple[str, int]]:
    root = Path(home) / "calibration"
    out = []
    for d in sorted(root.glob("*/v*")) if root.is_dir() else []:
        if (d / "candidate.yaml").exists() and (task_id is None or d.parent.name == task_id):
            out.append((d.parent.name, int(d.name[1:])))
    return out


def runs_frame(plan: Plan, ids: dict[str, str | None]) -> pd.DataFrame:
    rows = [
        {
            "name": r.name,
            "role": r.role,
            "honest": r.honest,
            "quantized": r.quantized,
            "catches": ",".join(r.catches),
            "evaluation_id": ids.get(r.name),
        }
        for r in plan.runs
    ]
    return pd.DataFrame(rows)


def candidate_document(base_doc: dict, task_id: str, version: int, derived: dict, fit: dict | None) -> dict:
    doc = copy.deepcopy(base_doc)
    doc["version"] = version
    doc["published"] = UNPUBLISHED
    doc["notes"] = (
        f"v{base_doc['version']} with {task_id}'s values calibrated (protocol section 10): "
        "limits, speed noise, dev/test gap"
        + (", interleave m and think-time scale c" if fit else "")
        + "; evidence published with the version"
    )
    task = doc["tasks"][task_id]
    task["limits"] = dict(derived["limits"])
    task["speed_noise"] = dict(derived["speed_noise"])
    task["dev_test_gap"] = derived["dev_test_gap"]
    if fit:
        workloads = copy.deepcopy(task.get("workloads") or doc["workloads"])
        for w in ("team", "busy"):
            workloads[w]["interleave"] = int(fit["m"])
        task["workloads"] = workloads
        think = dict(task.get("think_time") or doc["think_time"])
        think["scale_c"] = float(fit["c"])
        task["think_time"] = think
    Protocol.model_validate(doc)  # a candidate that would not load is an error here, not at publish
    return doc


def _gate_rows(scores, runs: pd.DataFrame) -> pd.DataFrame:
    g = scores.gates.merge(runs, on="evaluation_id")
    return g


def _value_rows(derived: dict, runs: pd.DataFrame, base_gates: pd.DataFrame, base_task, base_gap: float) -> list[dict]:
    """The section 10 table: per limit its value, the honest runs' range and each control's value."""
    rows = []
    lim = derived["limits"]
    for gate in CALIBRATED_GATES:
        key = LIMIT_OF_GATE[gate]
        g = base_gates[base_gates["gate"] == gate]
        honest = g[g["honest"]]
        value = lim[key]
        controls = []
        for r in g[g["role"] == "control"].itertuples():
            if gate in BOUND_GATES:
                caught = bool(beyond(r.ci_low, r.ci_high, value)[()])
            elif gate == "target_fidelity":
                caught = bool(r.statistic > value)
            else:
                caught = value is not None and bool(r.statistic < value)
            controls.append(
                {
                    "name": r.name,
                    "value": _num(r.statistic),
                    "ci_low": _num(r.ci_low),
                    "ci_high": _num(r.ci_high),
                    "caught": caught,
                    "expected": gate in r.catches.split(","),
                }
            )
        hs = honest["statistic"].dropna()
        rows.append(
            {
                "limit": key,
                "gate": gate,
                "value": value,
                "previous": getattr(base_task.limits, key),
                "rule": derived["why"][key],
                "honest_range": [_num(hs.min()), _num(hs.max())] if len(hs) else None,
                "honest_ci": [_num(honest["ci_low"].min()), _num(honest["ci_high"].max())]
                if gate in BOUND_GATES and len(honest)
                else None,
                "controls": controls,
            }
        )
    aa = [s for s in derived["aa_specscores"] if s is not None]
    rows.append(
        {
            "limit": "speed_noise",
            "gate": None,
            "value": derived["speed_noise"],
            "previous": dict(base_task.speed_noise),
            "rule": derived["why"]["speed_noise"],
            "honest_range": [min(aa), max(aa)] if aa else None,
            "controls": [],
        }
    )
    rows.append(
        {
            "limit": "dev_test_gap",
            "gate": None,
            "value": derived["dev_test_gap"],
            "previous": base_gap,
            "rule": derived["why"]["dev_test_gap"],
            "honest_range": None,
            "controls": [],
        }
    )
    return rows


def _num(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _verdicts(scores, runs: pd.DataFrame) -> list[dict]:
    """Each run's verdicts under the candidate: honest runs must pass every gate, controls must fail one."""
    ev = scores.evaluations.set_index("evaluation_id")
    out = []
    for r in runs.itertuples():
        g = scores.gates[scores.gates["evaluation_id"] == r.evaluation_id]
        verdicts = dict(zip(g["gate"], g["verdict"]))
        failed = sorted(k for k, v in verdicts.items() if v == "fail")
        row = ev.loc[r.evaluation_id] if r.evaluation_id in ev.index else None
        entry = {
            "name": r.name,
            "role": r.role,
            "honest": bool(r.honest),
            "quantized": bool(r.quantized),
            "evaluation_id": r.evaluation_id,
            "verdicts": verdicts,
            "failed_gates": failed,
            "status": None if row is None else row["status"],
            "specscore": None if row is None else _num(row["specscore"]),
            "specscore_reason": None
            if row is None or not isinstance(row["specscore_reason"], str)
            else row["specscore_reason"],
        }
        if r.role == "control":
            expected = [x for x in r.catches.split(",") if x]
            entry["expected_gates"] = expected
            entry["caught"] = bool(failed)
            entry["caught_by_expected"] = bool(set(failed) & set(expected))
        else:
            entry["passes_every_gate"] = not failed
        out.append(entry)
    return out


def problems_of(verdicts: list[dict], missing: list[str]) -> list[str]:
    out = []
    for v in verdicts:
        if v["role"] == "control" and not v["caught"]:
            out.append(
                f"control {v['name']} passes every gate under the candidate: the calibration does not "
                f"separate it from the honest runs (expected to be caught by {', '.join(v['expected_gates'])})"
            )
        if v["honest"] and v["failed_gates"]:
            out.append(f"honest run {v['name']} fails {', '.join(v['failed_gates'])} under the candidate")
    out += [f"run {name} has no measured evaluation (void or not run): left out" for name in missing]
    return out


def build_candidate(
    wh: Warehouse, plan: Plan, ids: dict[str, str | None], fit: dict | None = None, progress=None
) -> dict:
    """Derive the values from the stored runs, write candidate.yaml, evidence.json/.md and plots.
    Returns the evidence (a dict, what evidence.json holds)."""
    from speculator_arena.scoring import score_warehouse

    say = progress or (lambda m: None)
    runs_all = runs_frame(plan, ids)
    missing = runs_all.loc[runs_all["evaluation_id"].isna(), "name"].tolist()
    runs = runs_all.dropna(subset=["evaluation_id"]).reset_index(drop=True)
    if (runs["role"] == "aa").sum() < 2 or not runs["honest"].any():
        raise RuntimeError(f"too few measured calibration runs to derive anything (missing: {missing})")
    say(f"[calibrate {plan.task_id}] scoring {len(runs)} runs under v{plan.base_version}")
    base_scores = score_warehouse(wh, plan.base_version, evaluation_ids=runs["evaluation_id"].tolist())
    derived = derive(runs, base_scores.gates, base_scores.evaluations)
    base_doc = yaml.safe_load(version_path(plan.base_version).read_text(encoding="utf-8"))
    doc = candidate_document(base_doc, plan.task_id, plan.candidate_version, derived, fit)
    say(f"[calibrate {plan.task_id}] scoring the runs under the candidate v{plan.candidate_version}")
    cand_scores = score_warehouse(wh, evaluation_ids=runs["evaluation_id"].tolist(), document=doc)
    base_proto = Protocol.model_validate(base_doc)
    base_task = base_proto.tasks[plan.task_id]
    base_gates = _gate_rows(base_scores, runs)
    verdicts = _verdicts(cand_scores, runs)
    problems = problems_of(verdicts, missing)
    if len(runs[runs["role"] == "aa"]) < 4:
        problems.append(f"only {int((runs['role'] == 'aa').sum())} measured A/A runs; section 10 asks at least 4")
    evidence = {
        "task_id": plan.task_id,
        "base_version": plan.base_version,
        "candidate_version": plan.candidate_version,
        "made_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "candidate_digest": cand_scores.protocol_digest,
        "runs": runs_all.where(runs_all.notna(), None).to_dict("records"),
        "values": _value_rows(derived, runs, base_gates, base_task, base_proto.task(plan.task_id).dev_test_gap),
        "limits": derived["limits"],
        "speed_noise": derived["speed_noise"],
        "dev_test_gap": derived["dev_test_gap"],
        "aa_specscores": derived["aa_specscores"],
        "verdicts": verdicts,
        "gate_rows": _gate_records(base_gates),
        "fit": fit,
        "separates": not problems,
        "problems": problems,
    }
    d = candidate_dir(wh.home, plan.task_id, plan.candidate_version)
    d.mkdir(parents=True, exist_ok=True)
    (d / "candidate.yaml").write_text(
        f"# Protocol CANDIDATE v{plan.candidate_version} from the calibration of {plan.task_id} on v{plan.base_version}.\n"
        "# Not a version until `arena protocol publish` makes it one; evidence in evidence.json / evidence.md.\n"
        + yaml.safe_dump(doc, sort_keys=False),
        encoding="utf-8",
    )
    from speculator_arena.calibration import plots

    evidence["plots"] = plots.write_plots(evidence, d / "plots")
    (d / "evidence.json").write_text(json.dumps(evidence, indent=2, default=str), encoding="utf-8")
    from speculator_arena.calibration.evidence import evidence_markdown

    (d / "evidence.md").write_text(evidence_markdown(evidence), encoding="utf-8")
    say(
        f"[calibrate {plan.task_id}] candidate v{plan.candidate_version} written to {d}"
        + ("" if evidence["separates"] else f"; {len(problems)} problem(s): " + "; ".join(problems))
    )
    return evidence


def _gate_records(g: pd.DataFrame) -> list[dict]:
    cols = [
        "name",
        "role",
        "honest",
        "quantized",
        "evaluation_id",
        "gate",
        "statistic",
        "se",
        "ci_low",
        "ci_high",
        "verdict",
    ]
    out = []
    for r in g[g["gate"].isin(CALIBRATED_GATES)][cols].to_dict("records"):
        out.append({k: (_num(v) if k in ("statistic", "se", "ci_low", "ci_high") else v) for k, v in r.items()})
    return out


def load_evidence(home, task_id: str, version: int) -> dict:
    p = candidate_dir(home, task_id, version) / "evidence.json"
    if not p.exists():
        raise FileNotFoundError(f"no calibration candidate v{version} of {task_id} under {p.parent}")
    return json.loads(p.read_text(encoding="utf-8"))
