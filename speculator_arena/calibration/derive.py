"""SCORING.md "Calibration": each calibrated value as a pure function of the calibration runs'
stored scores (the scorer's gate rows and workload ratios), so that tests and the evidence can
check every value against its rule.

Inputs are plain arrays/frames: `runs` (one row per run: name, role, honest, quantized,
evaluation_id) and the scorer's `gates` and `evaluations` frames for those evaluation ids. The
gates' statistics and intervals do not depend on the limits being calibrated (only on `z` and
the probe sizes), so scoring the runs under the version they were made with gives the inputs.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

STEP = 0.005  # the bounds' grid (SCORING.md)
MIN_CEILING = 1e-6  # the fidelity ceiling is never below this
QUANTIZED_FACTOR = 1.5  # without a quantized control: 1.5 x the highest honest value
FLOOR_SEPARATION = 0.2  # the greedy floor needs honest and quantized this far apart
GAP_FACTOR = 5  # dev/test gap = 5 x the worst A/A noise
MAX_GAP = 0.95  # the protocol's dev_test_gap must stay below 1 (a cap, reported when hit)
BOUND_RULE = (
    "smallest multiple of 0.005 beyond which no honest run's 95% interval lies and at least the largest "
    "honest standard error of D, plus 0.005"
)
BOUND_GATES = {"sampled_likelihood": "likelihood_bound", "first_choice": "first_choice_bound"}


def two_significant(x: float) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.2g}")


def aa_specscore(r_solo, r_team, r_busy) -> np.ndarray:
    """An A/A run's SpecScore as it is under the candidate, where it passes every gate by
    construction: the geometric mean of its workload ratios (NaN where one is blank: void)."""
    r = np.vstack([np.asarray(x, dtype=float) for x in (r_solo, r_team, r_busy)])
    return np.cbrt(np.prod(r, axis=0))


PREDICTION_LEVEL = 0.99  # the speed noise's prediction bound (protocol v13 on: `speed_noise(prediction=True)`)
PREDICTION_RULE = (
    "the larger of the runs' max |1 - S| and the 99% prediction bound of one further run's |1 - S|: "
    "t(0.995, n) x sqrt(mean((S - 1)^2)) x sqrt(1 + 1/n)"
)


def prediction_bound(aa_scores, level: float = PREDICTION_LEVEL) -> float | None:
    """The bound one further A/A run's |SpecScore - 1| stays within with probability `level`,
    from n runs: an A/A run's SpecScore scatters about 1 (the same engine on both sides), so
    its spread is the root mean square of S - 1 with n degrees of freedom, and a new run's
    S - 1 over it follows Student's t scaled by sqrt(1 + 1/n).

    Why (issue 31): the max of n runs is no bound on the next one: for runs drawn alike, one of
    4 further runs exceeds the max of the first 8 with probability 4/12, whatever the noise."""
    from scipy.stats import t

    s = np.asarray(aa_scores, dtype=float)
    s = s[~np.isnan(s)]
    n = len(s)
    if n < 2:
        return None
    rms = float(np.sqrt(np.mean((s - 1) ** 2)))
    return round(float(t.ppf(0.5 + level / 2, n)) * rms * math.sqrt(1 + 1 / n), 4)


def speed_noise(aa_scores, prediction: bool = False) -> dict:
    """Mean and max of |SpecScore - 1| over the A/A runs (blank ones left out). `prediction`
    (protocol v13 on, the CPU tasks' A/A staging): the max is at least the runs' 99% prediction
    bound (`prediction_bound`), so that it holds on runs it was not derived from."""
    s = np.asarray(aa_scores, dtype=float)
    s = s[~np.isnan(s)]
    if len(s) == 0:
        return {"mean_abs_error": None, "max_abs_error": None, "runs": 0}
    err = np.abs(s - 1)
    worst = round(float(err.max()), 4)
    out = {"mean_abs_error": round(float(err.mean()), 4), "max_abs_error": worst, "runs": len(s)}
    if prediction:
        pb = prediction_bound(s)
        out.update(observed_max_abs_error=worst, prediction_bound=pb, max_abs_error=max(worst, pb or 0.0))
    return out


def bound(honest_low, honest_high, honest_se=None, step: float = STEP) -> float:
    """The smallest multiple of `step` beyond which no honest CI lies (entirely above +b or
    entirely below -b) and which is at least the largest honest standard error of D, plus one step.

    Why the standard error (protocol v12; SCORING.md's rule had the intervals only): an honest
    candidate's D scatters about 0 with its standard error, so with b far under one SE it fails
    whenever its D lands 1.96 SE from 0, about 5% of honest runs per gate. The GPU tasks' bounds
    are about one SE of their 512 replies wide (0.02), where that rate is 0.3%; the CPU tasks'
    few replies have SEs of 0.05-0.3 that the interval rule alone left at 0.005 (an A/A run's D
    is exactly 0, so A/A runs never widen it). With b >= SE an honest run fails by chance at most
    2 x Phi(-(1.96 + 1)) = 0.3% per gate, and a control is caught when its shift exceeds b by its
    own 1.96 SE (every planted control of the v5 calibration still is: docs/scoring.md)."""
    lo = np.asarray(honest_low, dtype=float)
    hi = np.asarray(honest_high, dtype=float)
    keep = ~(np.isnan(lo) | np.isnan(hi))
    if not keep.any():
        raise ValueError("no honest run has an interval for this gate: the bound cannot be calibrated")
    need = max(0.0, float(np.max(lo[keep])), float(np.max(-hi[keep])))
    se = np.asarray([] if honest_se is None else honest_se, dtype=float)
    se = se[~np.isnan(se)]
    if len(se):
        need = max(need, float(np.max(se)))
    k = math.ceil(need / step - 1e-9)
    return round((k + 1) * step, 6)


def beyond(low, high, b) -> np.ndarray:
    """The two-sided rule: the CI lies entirely above +b or entirely below -b."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    return (low > b) | (high < -b)


def fidelity_ceiling(honest_values, quantized_values) -> tuple[float, str]:
    h = np.asarray(honest_values, dtype=float)
    h = h[~np.isnan(h)]
    if len(h) == 0:
        raise ValueError("no honest run has a fidelity value: the ceiling cannot be calibrated")
    top = float(h.max())
    q = np.asarray(quantized_values, dtype=float)
    q = q[~np.isnan(q)]
    if len(q):
        low_q = float(q.min())
        value = max(MIN_CEILING, two_significant(math.sqrt(top * low_q)))
        return (
            value,
            f"geometric mean of the highest honest value {top:.3g} and the lowest quantized control's {low_q:.3g}",
        )
    return max(MIN_CEILING, two_significant(QUANTIZED_FACTOR * top)), f"1.5 x the highest honest value {top:.3g}"


def greedy_floor(honest_values, quantized_values) -> tuple[float | None, str]:
    h = np.asarray(honest_values, dtype=float)
    h = h[~np.isnan(h)]
    q = np.asarray(quantized_values, dtype=float)
    q = q[~np.isnan(q)]
    if len(h) == 0 or len(q) == 0:
        return None, "no floor: " + ("no quantized control" if len(h) else "no honest run measured")
    lo_h, hi_q = float(h.min()), float(q.max())
    if lo_h - hi_q >= FLOOR_SEPARATION:
        return round(
            (lo_h + hi_q) / 2, 3
        ), f"midpoint of the lowest honest {lo_h:.3f} and the highest quantized {hi_q:.3f}"
    return None, (
        f"no floor: the lowest honest {lo_h:.3f} and the highest quantized {hi_q:.3f} are less than "
        f"{FLOOR_SEPARATION} apart"
    )


def dev_test_gap(max_abs_error) -> tuple[float, str]:
    if max_abs_error is None:
        raise ValueError("no A/A run with a SpecScore: the dev/test gap cannot be calibrated")
    gap = round(GAP_FACTOR * float(max_abs_error), 4)
    if gap > MAX_GAP:
        return MAX_GAP, f"5 x {max_abs_error} = {gap}, capped at {MAX_GAP} (the flag needs a gap below 1)"
    return gap, f"5 x the worst A/A noise {max_abs_error}"


def gate_table(runs: pd.DataFrame, gates: pd.DataFrame) -> pd.DataFrame:
    """One row per run and gate: the run's columns joined to the scorer's gate row."""
    cols = ["evaluation_id", "gate", "statistic", "se", "ci_low", "ci_high", "verdict", "detail"]
    return runs.merge(gates[cols], on="evaluation_id", how="left")


def derive(runs: pd.DataFrame, gates: pd.DataFrame, evaluations: pd.DataFrame) -> dict:
    """Every calibrated value of SCORING.md from the runs' stored scores, each with its inputs.

    `runs`: name, role (aa | reference | control), honest, quantized, evaluation_id (measured runs only).
    Returns {"limits": {...}, "speed_noise": {...}, "dev_test_gap": float, "evidence": {value: why}}.
    """
    t = gate_table(runs, gates)
    honest = t[t["honest"]]
    quant = t[t["quantized"]]

    def stat(frame, gate, col="statistic"):
        return frame.loc[frame["gate"] == gate, col].to_numpy(dtype=float)

    limits, why = {}, {}
    for gate, key in BOUND_GATES.items():
        limits[key] = bound(stat(honest, gate, "ci_low"), stat(honest, gate, "ci_high"), stat(honest, gate, "se"))
        why[key] = BOUND_RULE
    limits["fidelity_ceiling"], why["fidelity_ceiling"] = fidelity_ceiling(
        stat(honest, "target_fidelity"), stat(quant, "target_fidelity")
    )
    limits["greedy_agreement_floor"], why["greedy_agreement_floor"] = greedy_floor(
        stat(honest, "greedy_agreement"), stat(quant, "greedy_agreement")
    )
    ev = evaluations.set_index("evaluation_id")
    aa_ids = runs.loc[runs["role"] == "aa", "evaluation_id"]
    aa = ev.reindex(aa_ids)
    scores = aa_specscore(aa["r_solo"], aa["r_team"], aa["r_busy"])
    noise = speed_noise(scores)
    gap, why["dev_test_gap"] = dev_test_gap(noise["max_abs_error"])
    why["speed_noise"] = f"|SpecScore - 1| over {noise['runs']} A/A runs: " + ", ".join(
        f"{s:.4f}" for s in scores if not math.isnan(s)
    )
    return {
        "limits": limits,
        "speed_noise": {k: noise[k] for k in ("mean_abs_error", "max_abs_error")},
        "aa_specscores": [None if math.isnan(s) else float(s) for s in scores],
        "dev_test_gap": gap,
        "why": why,
    }
