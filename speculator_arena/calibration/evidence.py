"""The evidence of a calibration as text: section 10's table (limit, value, the honest runs'
range, each control's value and whether it is caught), then each run's verdicts under the
candidate, then what does not hold. What evidence.md holds and the Protocol page shows."""

from __future__ import annotations


def _fmt(x) -> str:
    if x is None:
        return "none"
    if isinstance(x, dict):
        return ", ".join(f"{k} {_fmt(v)}" for k, v in x.items())
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _range(r) -> str:
    return "-" if not r else f"{_fmt(r[0])} to {_fmt(r[1])}"


def value_table(evidence: dict) -> list[dict]:
    """Section 10's table as rows (strings), one per calibrated value."""
    rows = []
    for v in evidence["values"]:
        controls = (
            "; ".join(
                f"{c['name']} {_fmt(c['value'])}"
                + (f" [{_fmt(c['ci_low'])}, {_fmt(c['ci_high'])}]" if c.get("ci_low") is not None else "")
                + (" caught" if c["caught"] else " not caught")
                for c in v["controls"]
            )
            or "-"
        )
        honest = _range(v.get("honest_range"))
        if v.get("honest_ci"):
            honest += f" (95% intervals within {_range(v['honest_ci'])})"
        rows.append(
            {
                "limit": v["limit"],
                "value": _fmt(v["value"]),
                "previous": _fmt(v.get("previous")),
                "honest runs": honest,
                "controls": controls,
                "rule": v["rule"],
            }
        )
    fit = evidence.get("fit")
    if fit:
        rows.append(
            {
                "limit": "interleave m, think-time scale c",
                "value": f"m {fit['m']}, c {fit['c']}",
                "previous": f"m {fit.get('previous_m')}, c {fit.get('previous_c')}",
                "honest runs": "achieved " + _fmt(fit["achieved"]),
                "controls": "targets " + _fmt(fit["targets"]),
                "rule": fit["rule"],
            }
        )
    return rows


def evidence_markdown(evidence: dict) -> str:
    e = evidence
    head = (
        f"# Calibration of {e['task_id']}: protocol candidate v{e['candidate_version']} "
        f"(runs made under v{e['base_version']}, {e['made_at']})\n\n"
    )
    if e["problems"]:
        head += (
            "**THIS CALIBRATION DOES NOT SEPARATE THE HONEST RUNS FROM EVERY CONTROL** "
            "(publishing it needs `--override`):\n\n" + "".join(f"- {p}\n" for p in e["problems"]) + "\n"
        )
    else:
        controls = [v for v in e["verdicts"] if v["role"] == "control"]
        head += "Every honest run passes every gate under the candidate" + (
            ", and every control fails one.\n\n" if controls else "; no planted controls ran on this task.\n\n"
        )
    lines = [head, "| limit | value | previous | honest runs | controls | rule |", "|---|---|---|---|---|---|"]
    for r in value_table(e):
        lines.append(
            "| "
            + " | ".join(
                str(r[k]).replace("|", "/") for k in ("limit", "value", "previous", "honest runs", "controls", "rule")
            )
            + " |"
        )
    lines += [
        "",
        "## Each run under the candidate",
        "",
        "| run | role | evaluation | SpecScore | failed gates | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for v in e["verdicts"]:
        if v["role"] == "control":
            verdict = ("caught" if v["caught"] else "NOT CAUGHT") + (
                "" if v["caught_by_expected"] else f" (expected by {', '.join(v['expected_gates'])})"
            )
        else:
            verdict = "passes every gate" if v["passes_every_gate"] else "FAILS"
        lines.append(
            f"| {v['name']} | {v['role']}{' (quantized)' if v['quantized'] else ''} | {v['evaluation_id']} | "
            f"{_fmt(v['specscore'])} | {', '.join(v['failed_gates']) or '-'} | {verdict} |"
        )
    for name, path in (e.get("plots") or {}).items():
        lines += ["", f"![{name}](plots/{path})"]
    return "\n".join(lines) + "\n"
