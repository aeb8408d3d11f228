"""The m/c fit's plan as a spec carries it (`EvaluationSpec.fit`): its shape, checked when the spec
is built, and the pass id of each grid point. Apart from runners/fit_passes.py, which serves it,
because the spec checks it and the server reads the spec."""

from __future__ import annotations

import math

from speculator_arena.protocol.model import WORKLOADS

MAX_POINTS = 100  # a plan's grid points: the calibration's full grid is 20


def pass_id(m: int, c: float) -> str:
    return f"fit-m{m}-c{c:g}"


def check_plan(plan) -> dict:
    """The `fit` field of a spec, validated: {"workload": str, "seconds": float, "points": [[m, c], ...]}.
    Raises ValueError naming what is wrong (before anything is stored)."""
    if not isinstance(plan, dict) or set(plan) != {"workload", "seconds", "points"}:
        raise ValueError("a fit plan has exactly the keys workload, seconds and points")
    workload, seconds, points = plan["workload"], plan["seconds"], plan["points"]
    if workload not in WORKLOADS:
        raise ValueError(f"fit workload must be one of {', '.join(WORKLOADS)}, not {workload!r}")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"fit pass seconds must be a positive number, not {seconds!r}")
    if not isinstance(points, list | tuple) or not 0 < len(points) <= MAX_POINTS:
        raise ValueError(f"a fit plan has 1 to {MAX_POINTS} grid points")
    out = []
    for p in points:
        ok = isinstance(p, list | tuple) and len(p) == 2
        m, c = p if ok else (None, None)
        if not ok or isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"a fit point is [m, c] with m a whole number of at least 1, not {p!r}")
        if isinstance(c, bool) or not isinstance(c, int | float) or not math.isfinite(c) or c <= 0:
            raise ValueError(f"a fit point's think-time scale c must be a positive number, not {p!r}")
        out.append([int(m), float(c)])
    if len({pass_id(m, c) for m, c in out}) != len(out):
        raise ValueError("a fit plan names a grid point twice")
    return {"workload": workload, "seconds": float(seconds), "points": out}


def plan_from_text(points: str, seconds: float, workload: str = "busy") -> dict:
    """A plan from the runner's command line (`--fit 1:0.5,2:2 --fit-seconds 240`), checked."""
    pairs = []
    for item in points.split(","):
        m, sep, c = item.strip().partition(":")
        try:
            pairs.append([int(m), float(c)])
        except ValueError:
            raise ValueError(f"--fit takes m:c pairs separated by commas (1:0.5,2:2), not {item.strip()!r}") from None
        if not sep:
            raise ValueError(f"--fit takes m:c pairs separated by commas (1:0.5,2:2), not {item.strip()!r}")
    return check_plan({"workload": workload, "seconds": seconds, "points": pairs})
