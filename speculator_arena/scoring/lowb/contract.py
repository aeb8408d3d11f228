"""The contract's tensor checks: is the candidate's checkpoint a quantization of the task's model?

Definitions (the arena's reading of "a quantization of the task's model: its weights in any format,
other tensors at most 1% of its bytes"), against the stock engine's tensors (the BF16 target's):
- a candidate tensor is the model's when its name is a target tensor's, or the target name without
  `.weight` followed by `.<companion>` (the protocol's companion_suffixes: packed weights, scales,
  zero points, group indices of the usual formats); every other tensor is "other", and other bytes
  over the checkpoint's bytes must be at most max_other_tensor_share;
- every target tensor must be represented (under its name or a companion's);
- relabelled: the checkpoint declares a quantization (declared_method not null) but stores every
  2-D decoder Linear weight of the target (decoder_linear_pattern) under its own name in an
  unquantized dtype;
- not a quantization: none of the model's tensors is in a dtype other than the unquantized ones.
References of an exempt kind (bf16) are exempt from the last two: BF16 beside itself is the A/A.
"""

from __future__ import annotations

import json
import re

import pandas as pd

from speculator_arena.protocol.lowb import LowbProtocol


def _base(name: str, companions: re.Pattern) -> str | None:
    m = companions.fullmatch(name)
    return m.group(1) + ".weight" if m else None


def _two_d(shape) -> bool:
    try:
        return len(json.loads(shape)) == 2
    except (TypeError, ValueError):
        return False


def tensor_checks(tensors: pd.DataFrame, declared_method, exempt: bool, proto: LowbProtocol) -> list[dict]:
    """The contract's tensor check rows of one evaluation (check, statistic, limit, verdict, detail)."""
    rule = proto.gates.contract
    target = tensors[tensors["engine"] == "stock"]
    cand = tensors[tensors["engine"] == "candidate"]
    if target.empty or cand.empty:
        which = "stock (the BF16 target)" if target.empty else "candidate"
        return [_row("tensors", None, None, "blank", f"no lowb_tensors rows of the {which}")]
    names = set(target["tensor"])
    companions = re.compile(r"(.*)\.(" + "|".join(map(re.escape, rule.companion_suffixes)) + r")")
    bases = [_base(t, companions) for t in cand["tensor"]]
    own = [t in names or (b is not None and b in names) for t, b in zip(cand["tensor"], bases, strict=True)]
    own_mask = pd.Series(own, index=cand.index)
    total = float(cand["bytes"].sum())
    other = float(cand.loc[~own_mask, "bytes"].sum())
    share = other / total if total > 0 else float("nan")
    rows = [
        _row(
            "other_tensors",
            share,
            rule.max_other_tensor_share,
            "blank" if total <= 0 else ("pass" if share <= rule.max_other_tensor_share else "missed"),
            f"{int((~own_mask).sum())} other tensors, {other:.0f} of {total:.0f} bytes",
        )
    ]
    represented = set(cand["tensor"]) | {b for b in bases if b is not None}
    missing = sorted(names - represented)
    rows.append(
        _row(
            "represented",
            float(len(missing)),
            0.0,
            "pass" if not missing else "missed",
            "every target tensor represented" if not missing else f"missing {missing[:3]}",
        )
    )
    if exempt:
        return rows
    unquantized = set(rule.unquantized_dtypes)
    quantized = int((own_mask & ~cand["dtype"].isin(unquantized)).sum())
    pattern = re.compile(rule.decoder_linear_pattern)
    linear = {t for t, s in zip(target["tensor"], target["shape"], strict=True) if pattern.search(t) and _two_d(s)}
    stored_float = set(cand.loc[cand["tensor"].isin(linear) & cand["dtype"].isin(unquantized), "tensor"])
    relabelled = (
        declared_method is not None and not pd.isna(declared_method) and bool(linear) and stored_float == linear
    )
    rows.append(
        _row(
            "relabelled",
            float(len(stored_float)) / len(linear) if linear else 0.0,
            None,
            "missed" if relabelled else "pass",
            f"declares {declared_method} but keeps every decoder Linear weight unquantized"
            if relabelled
            else f"{len(stored_float)} of {len(linear)} decoder Linear weights unquantized",
        )
    )
    rows.append(
        _row(
            "quantization",
            float(quantized),
            1.0,
            "pass" if quantized >= 1 else "missed",
            f"{quantized} quantized tensors" if quantized else "not a quantization: no quantized weights",
        )
    )
    return rows


def _row(check, statistic, limit, verdict, detail) -> dict:
    return {
        "gate": "contract",
        "check": check,
        "statistic": statistic,
        "limit": limit,
        "verdict": verdict,
        "detail": detail,
    }
