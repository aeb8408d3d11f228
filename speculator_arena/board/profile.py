"""An evaluation's speculation profile, measured on the arena's traffic: `speculation_profile.json`
in NVIDIA Model-Optimizer's schema 1.0 (its `specdec_bench` and `ar_validate` write the same
document from their own runs), for the evaluation page's download and
`GET /api/evaluations/{id}/speculation_profile.json`.

Why publish one: a drafter's checkpoint says nothing of how well it drafts; Model-Optimizer's
profile is the document deployment tools (Dynamo's mocker, vLLM's synthetic rejection sampler)
read for that, and the arena measures the same quantities on real multi-turn traffic rather than
a benchmark's prompts. Both of the schema's conventions are given, since each consumer wants one:
conditional, P(draft position k accepted | positions before it accepted), and marginal,
P(positions 0..k all accepted).

Where each number comes from (the candidate engine's counters, differenced around each timed
pass and summed over passes: `acceptance.counter_deltas`, the reading the page's figures use):
marginal[k] = accepted at position k / drafts; conditional[k] = marginal[k] / marginal[k-1]
(marginal[-1] = 1; 0 after a marginal of 0, as Model-Optimizer writes it); mean acceptance length
per step = 1 + accepted / drafts (the scorer's `mean_acceptance_length`); the histogram of
acceptance lengths (tokens a step emits, the target's own token included, so length 1 = no draft
accepted) = steps that accepted exactly k drafts = accepted at k-1 - accepted at k, derivable only
where the per-position counts form a prefix. `per_category` holds the same section per workload
(solo, team, busy); the top level pools all three. Steps without a draft are in no number here.
The schema's per-request mean is null: no engine reports acceptance per request in the stored
rows. The arena adds `draft_acceptance_rate` (accepted / draft tokens), `counts` (the deltas
themselves), `acceptance_by_context` (context.py: acceptance against prompt length and turn, from
the stream, labelled) and `sources`.

A test evaluation's profile is refused (403), like its per-request rows: the acceptance of its
traffic by position, workload, prompt length and turn describes the hidden pool. Its summary
figures (mean acceptance length, draft acceptance rate) stay on the board.

`validate_profile` checks the schema's rules on any document of this shape: marginal[k] = the
product of conditionals up to k, marginals non-increasing, mean acceptance length = 1 + Σ
marginals, the histogram's shares summing to 1 with its per-step mean equal to the mean, and the
recorded `validation` equal to the checks recomputed from the numbers.
"""

from __future__ import annotations

import json
import math
import os

import pandas as pd

from speculator_arena.board.acceptance import PER_POS, counter_deltas, positions, step_counts
from speculator_arena.board.context import SOURCE, WHY_NOT_COUNTERS, by_context
from speculator_arena.board.data import evaluations_index
from speculator_arena.board.export import check_exportable
from speculator_arena.board.shown import ALL, ShownRows, read_shown
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.model import WORKLOADS

SCHEMA_VERSION = "1.0"
FILE_SUFFIX = "speculation_profile.json"
MEDIA_TYPE = "application/json"
NEEDED = (PER_POS, "drafts", "draft_tokens", "accepted_tokens")
TOLERANCE = 1e-9  # the counters are exact counts: the rules hold to rounding
ENGINE = "candidate"
REFUSED = "speculation profiles are"
SECTION_KEYS = (
    "measured",
    "num_speculative_tokens",
    "conditional_accept_rates",
    "marginal_accept_rates",
    "mean_accept_length",
    "acceptance_length_histogram",
    "validation",
)
TOP_KEYS = (
    "schema_version",
    "method",
    "draft_checkpoint",
    "target_model",
    "block_size",
    "max_supported_k",
    "verification_method",
    "mean_accept_length_per_request",
    "accept_length_model",
    "accept_length_by_k",
    "per_category",
    "measurement_conditions",
    *SECTION_KEYS,
)
SOURCES = {
    "marginal_accept_rates": "accepted at draft position k / drafts (vllm:spec_decode_num_accepted_tokens_per_pos, "
    "vllm:spec_decode_num_drafts), differenced around each timed pass",
    "conditional_accept_rates": "marginal[k] / marginal[k-1] (marginal[-1] = 1)",
    "mean_accept_length": "1 + accepted / drafts (vllm:spec_decode_num_accepted_tokens, vllm:spec_decode_num_drafts), "
    "per verification step with a draft",
    "draft_acceptance_rate": "accepted / draft tokens (vllm:spec_decode_num_draft_tokens)",
    "acceptance_length_histogram": "steps that emitted L tokens = accepted at L-2 - accepted at L-1 "
    "(drafts for L = 1), where the per-position counts form a prefix",
    "mean_accept_length_per_request": "null: no engine reports acceptance per request in the stored rows",
    "per_category": "the same section per workload (solo, team, busy); the top level pools all three",
    "acceptance_by_context": SOURCE,
}


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def checks(section: dict) -> dict:
    """The schema's consistency checks of one measured section, from its own numbers (what
    `validation` records, and what validate_profile recomputes)."""
    marginal, conditional = section["marginal_accept_rates"], section["conditional_accept_rates"]
    mean = section["mean_accept_length"]
    implied = 1.0 + sum(marginal)
    out = {
        "mean_consistency": {
            "implied_mean_accept_length": implied,
            "reported_mean_accept_length": mean,
            "abs_delta": abs(implied - mean),
            "tolerance": TOLERANCE,
            "passed": abs(implied - mean) <= TOLERANCE,
        }
    }
    falls = [
        {"position": k, "value": marginal[k], "previous": marginal[k - 1]}
        for k in range(1, len(marginal))
        if marginal[k] > marginal[k - 1] + TOLERANCE
    ]
    out["marginal_monotonicity"] = {"passed": not falls, "violations": falls}
    off = [k for k in range(len(marginal)) if abs(math.prod(conditional[: k + 1]) - marginal[k]) > TOLERANCE]
    out["conditional_product"] = {"passed": not off, "violations": off, "tolerance": TOLERANCE}
    hist = section["acceptance_length_histogram"]
    if hist is None:
        out["histogram"] = {"passed": None, "reason": section.get("histogram_reason") or "no histogram"}
    else:
        total = sum(hist.values())
        shares = sum(n / total for n in hist.values()) if total > 0 else 0.0
        per_step = sum(int(k) * n for k, n in hist.items()) / total if total > 0 else math.nan
        out["histogram"] = {
            "shares_sum": shares,
            "per_step_mean_accept_length": per_step,
            "passed": min(hist.values()) >= 0 and abs(shares - 1.0) <= TOLERANCE and abs(per_step - mean) <= TOLERANCE,
        }
    return out


def section(deltas: dict, why: str | None) -> dict:
    """One engine and workload's profile section from its counters' deltas, or unmeasured with
    the reason (the blank rule, a counter the engine does not report, positions missing)."""
    acc = []
    if why is None:
        acc, why = positions(deltas)
    if why is not None:
        return {"measured": False, "reason": why}
    drafts, accepted = deltas[("drafts", None)], deltas[("accepted_tokens", None)]
    draft_tokens = deltas[("draft_tokens", None)]
    marginal = [a / drafts for a in acc]
    conditional = [m / prev if prev > 0 else 0.0 for m, prev in zip(marginal, [1.0, *marginal])]
    counts, hist_why = step_counts(deltas)
    out = {
        "measured": True,
        "num_speculative_tokens": len(acc),
        "conditional_accept_rates": conditional,
        "marginal_accept_rates": marginal,
        "mean_accept_length": 1.0 + accepted / drafts,
        "draft_acceptance_rate": accepted / draft_tokens if draft_tokens > 0 else None,
        "acceptance_length_histogram": None if hist_why else {str(k + 1): _number(n) for k, n in enumerate(counts)},
        "histogram_reason": hist_why,
        "counts": {
            "drafts": _number(drafts),
            "draft_tokens": _number(draft_tokens),
            "accepted_tokens": _number(accepted),
            "accepted_per_position": [_number(a) for a in acc],
        },
    }
    out["validation"] = checks(out)
    return out


def _context(rows: ShownRows, evaluation_id: str) -> dict:
    c = by_context(rows)
    c = c[(c["evaluation_id"] == evaluation_id) & (c["engine"] == ENGINE) & (c["workload"] == ALL)]
    blank = c[c["reason"].notna()]
    out = {"source": SOURCE, "why_not_counters": WHY_NOT_COUNTERS, "workload": ALL}
    if not blank.empty:
        return {**out, "reason": blank["reason"].iloc[0], "bins": []}
    cols = ["family", "axis", "bin_low", "bin_high", "requests", "chunks", "tokens", "acceptance_length"]
    cols.append("acceptance_length_per_request")
    bins = [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()} for r in c[cols].to_dict("records")]
    return {**out, "reason": None, "bins": bins}


def profile_document(rows: ShownRows, evaluation_id: str) -> dict:
    """The speculation profile of one evaluation read into `rows` (its candidate engine)."""
    per = counter_deltas(rows, NEEDED)
    ev = rows.index[rows.index["evaluation_id"] == evaluation_id].iloc[0]
    proto = load_protocol(rows.protocol_version)
    task = proto.tasks.get(ev["task_id"])
    top = section(*per[(evaluation_id, ENGINE, ALL)])
    k = top.get("num_speculative_tokens")
    doc = {
        "schema_version": SCHEMA_VERSION,
        "method": None if pd.isna(ev["solution_kind"]) else ev["solution_kind"],
        "draft_checkpoint": None,
        "target_model": {"model": task.model, "revision": task.revision} if task else None,
        "block_size": None,
        "max_supported_k": k,
        "verification_method": "longest_prefix",
        "conditional_accept_rates": [],
        "marginal_accept_rates": [],
        "mean_accept_length": None,
        "mean_accept_length_per_request": None,
        "accept_length_model": "measured_per_k",
        "accept_length_by_k": {str(k): top["mean_accept_length"]} if top["measured"] else {},
        "acceptance_length_histogram": None,
        "num_speculative_tokens": k,
        "validation": None,
        **top,
        "per_category": {w: section(*per[(evaluation_id, ENGINE, w)]) for w in WORKLOADS},
        "measurement_conditions": {
            "producer": "SpeculatorArena",
            "evaluation_id": evaluation_id,
            "task_id": ev["task_id"],
            "split": ev["split"],
            "label": None if pd.isna(ev["label"]) else ev["label"],
            "protocol_version": rows.protocol_version,
            "engine": ENGINE,
            "traffic": "the task's session pools served in the solo, team and busy workloads, every timed pass",
            "counters": "vllm:spec_decode_* read before and after each timed pass, differenced, summed over passes",
        },
        "acceptance_by_context": _context(rows, evaluation_id),
        "sources": SOURCES,
    }
    return doc


def _problems(where: str, s: dict) -> list[str]:
    if not isinstance(s, dict):
        return [f"{where}: not an object"]
    if s.get("measured") is not True:
        return [] if s.get("reason") else [f"{where}: unmeasured without a reason"]
    missing = [k for k in SECTION_KEYS if k not in s]
    if missing:
        return [f"{where}: missing {', '.join(missing)}"]
    k = s["num_speculative_tokens"]
    rates = ("conditional_accept_rates", "marginal_accept_rates")
    out = [f"{where}: {n} has {len(s[n])} entries, not num_speculative_tokens = {k}" for n in rates if len(s[n]) != k]
    if out:
        return out
    for name in rates:
        if any(not (isinstance(x, int | float) and 0.0 <= x <= 1.0) for x in s[name]):
            out.append(f"{where}: {name} holds a value that is not a probability")
    got = checks(s)
    for name, check in got.items():
        if check["passed"] is False:
            out.append(f"{where}: {name} fails: {json.dumps(check, default=str)}")
        elif check["passed"] is None and not s.get("histogram_reason"):
            out.append(f"{where}: no histogram and no reason")
    if s["validation"] != got:
        out.append(f"{where}: the recorded validation differs from the checks of its numbers")
    return out


def validate_profile(doc: dict) -> list[str]:
    """The schema's rules broken by a profile document (empty: it validates): schema version 1.0,
    the fields present, and in every measured section (the top level and each workload's) the
    consistency rules of `checks` passing and recorded as they are."""
    if doc.get("schema_version") != SCHEMA_VERSION:
        return [f"schema_version is {doc.get('schema_version')!r}, not {SCHEMA_VERSION!r}"]
    missing = [k for k in TOP_KEYS if k not in doc]
    if missing:
        return [f"missing {', '.join(missing)}"]
    out = _problems("profile", doc)
    for w, s in (doc["per_category"] or {}).items():
        out += _problems(f"per_category.{w}", s)
    return out


def speculation_profile(
    home: str | os.PathLike | None,
    evaluation_id: str,
    protocol_version: int | None = None,
    index: pd.DataFrame | None = None,
) -> dict:
    """A dev evaluation's profile, or ExportRefused (404 unknown, 403 a test evaluation)."""
    index = evaluations_index(home) if index is None else index
    check_exportable(index, evaluation_id, REFUSED)
    return profile_document(read_shown(home, [evaluation_id], protocol_version, index=index), evaluation_id)


def profile_json(doc: dict) -> bytes:
    """The document as the download's bytes (strict JSON: no NaN)."""
    return json.dumps(doc, indent=2, allow_nan=False).encode()
