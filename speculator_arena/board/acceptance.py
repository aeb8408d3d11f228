"""Acceptance in detail (shown, never scored): by draft position, per verification step, per chunk,
by session family and app, and SPEED-Bench's speedup proxy beside the measured ratio.

Two sources, never mixed:
- the engine's counters (the pinned vLLM's `vllm:spec_decode_*`, differenced around each pass,
  summed over a workload's passes): accepted tokens per draft position p, `acc[p]`, and drafts
  `d`. Acceptance at p = acc[p] / d (the share of drafts whose token p was accepted); SPEED-Bench's
  conditional acceptance rate AR = acc[p] / acc[p-1] (acc[-1] = d). Acceptance is a prefix, so
  the verification steps that accepted exactly k draft tokens number acc[k-1] - acc[k] (acc[-1] =
  d, acc[γ] = 0): the histogram of accepted tokens per step, where the engine reports it. Counts
  that are not a prefix (a later position accepting more than an earlier one) are an engine's
  report the arena cannot read, and blank the histogram. These are the engine's claims.
- the arena's own count of each streamed chunk (requests.chunk_tokens of counted requests): the
  histogram of tokens per chunk, where the engine reports no per-position counters, and the
  split by the session's family and app (counters are per pass, not per session). One chunk is
  one verification step only for an engine that streams every step as it happens.

SPEED-Bench's speedup proxy (its Appendix H): S = t_ar · AL / t_sd, with AL the candidate's mean
acceptance length (1 + accepted / drafts, its counters) and t_ar, t_sd the stock engine's and the
candidate's time per decoding step; here both are seen from the stream: Σ (last chunk − first
chunk) / Σ (chunks − 1) over counted requests with two chunks or more.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.board.shown import ALL, ENGINES, Blanks, ShownRows, expected_passes, keys, sub
from speculator_arena.protocol.model import WORKLOADS

PER_POS = "accepted_tokens_per_pos"
NO_COUNTER = {
    "drafts": "the engine reports no vllm:spec_decode_num_drafts counter",
    "draft_tokens": "the engine reports no vllm:spec_decode_num_draft_tokens counter",
    "accepted_tokens": "the engine reports no vllm:spec_decode_num_accepted_tokens counter",
    PER_POS: "the engine reports no per-position counters (vllm:spec_decode_num_accepted_tokens_per_pos)",
}
POSITION_COLUMNS = [
    "evaluation_id",
    "engine",
    "workload",
    "position",
    "accepted",
    "drafts",
    "rate",
    "conditional",
    "reason",
]
STEP_COLUMNS = ["evaluation_id", "engine", "workload", "source", "value", "count", "share", "reason", "note"]
FAMILY_COLUMNS = [
    "evaluation_id",
    "engine",
    "workload",
    "family",
    "app",
    "chunks",
    "tokens",
    "tokens_per_chunk",
    "reason",
]
PROXY_COLUMNS = ["evaluation_id", "workload", "t_ar", "t_sd", "acceptance_length", "proxy", "reason"]
STEPS = "accepted draft tokens per verification step (the engine's counters)"
CHUNKS = "tokens per chunk (the arena's count of each streamed chunk)"


def _counters(rows: ShownRows, needed: tuple[str, ...]) -> dict[tuple, tuple[dict, str | None]]:
    """Per (evaluation, engine, workload of WORKLOADS): the counters' deltas over its passes,
    {(counter, position): delta}, or the reason they cannot be read."""
    blank, expected = Blanks(rows), expected_passes(rows)
    out = {}
    for key in keys(rows):
        why = blank(*key)
        deltas: dict = {}
        if why is None:
            c = sub(rows.counters, *key)
            c = c[c["counter"].isin(needed)]
            absent = [n for n in needed if not (c["counter"] == n).any()]
            if absent:
                why = NO_COUNTER[absent[0]]
            elif (c["passes_missing_side"] > 0).any() or (c["passes_read"] < expected[key[0]]).any():
                why = "counters not read before and after every pass"
            elif (c["passes_down"] > 0).any():
                why = "a counter went down during a pass (the engine restarted, or its report is wrong)"
            elif ((c["counter"] == PER_POS) & c["position"].isna()).any():
                why = "a per-position sample has no readable position label"
            else:
                deltas = {
                    (n, None if pd.isna(p) else int(p)): float(d)
                    for n, p, d in zip(c["counter"], c["position"], c["delta"])
                }
                if deltas.get(("drafts", None), 0.0) <= 0:
                    why = "no drafts were proposed"
        out[key] = (deltas, why)
    return out


def _pooled(per: dict, evaluation_id: str, engine: str) -> tuple[dict, str | None]:
    """The deltas summed over the three workloads ('all'), blank if any workload is."""
    total: dict = {}
    reasons = []
    for w in WORKLOADS:
        deltas, why = per[(evaluation_id, engine, w)]
        if why is not None:
            reasons.append(f"{w}: {why}")
        for k, v in deltas.items():
            total[k] = total.get(k, 0.0) + v
    return (total, "; ".join(reasons)) if reasons else (total, None)


def _with_all(rows: ShownRows, per: dict) -> dict:
    out = dict(per)
    for e in rows.index["evaluation_id"]:
        for g in ENGINES:
            out[(e, g, ALL)] = _pooled(per, e, g)
    return out


def counter_deltas(rows: ShownRows, needed: tuple[str, ...]) -> dict[tuple, tuple[dict, str | None]]:
    """Per (evaluation, engine, workload and 'all'): the `needed` counters' deltas,
    {(counter, position): delta}, or why they cannot be read. The one reading of the counters that
    this module's figures and the speculation profile (profile.py) share, so they cannot differ."""
    return _with_all(rows, _counters(rows, needed))


def positions(deltas: dict) -> tuple[list[float], str | None]:
    """acc[0..γ-1] from the per-position deltas, or why they are not positions 0..γ-1."""
    have = sorted(p for (n, p) in deltas if n == PER_POS)
    if have != list(range(len(have))):
        missing = sorted(set(range(max(have) + 1)) - set(have))
        return [], f"draft positions {', '.join(map(str, missing))} not reported"
    return [deltas[(PER_POS, p)] for p in have], None


def by_position(rows: ShownRows) -> pd.DataFrame:
    """Acceptance by draft position, per evaluation, engine and workload (and 'all'): one row per
    position, or one blank row with the reason."""
    per = counter_deltas(rows, (PER_POS, "drafts"))
    out = []
    for key, (deltas, why) in per.items():
        acc = []
        if why is None:
            acc, why = positions(deltas)
        if why is not None:
            out.append((*key, np.nan, np.nan, np.nan, np.nan, np.nan, why))
            continue
        d = deltas[("drafts", None)]
        for p, a in enumerate(acc):
            before = d if p == 0 else acc[p - 1]
            out.append((*key, p, a, d, a / d, a / before if before > 0 else np.nan, None))
    return pd.DataFrame(out, columns=POSITION_COLUMNS)


def step_counts(deltas: dict) -> tuple[list[float], str | None]:
    """Verification steps that accepted exactly k = 0..γ draft tokens, from acc[] and d."""
    acc, why = positions(deltas)
    if why is not None:
        return [], why
    chain = [deltas[("drafts", None)], *acc, 0.0]
    counts = [chain[k] - chain[k + 1] for k in range(len(chain) - 1)]
    if any(n < 0 for n in counts):
        k = next(i for i, n in enumerate(counts) if n < 0)
        first = "drafts" if k == 0 else f"position {k - 1}"
        return [], f"the per-position counts are not a prefix acceptance (position {k} accepted more than {first})"
    return counts, None


def _chunk_counts(rows: ShownRows, key: tuple) -> pd.Series:
    """Chunks per token count of one evaluation, engine and workload (or 'all')."""
    c = sub(rows.chunks, *key)
    return c.groupby("tokens")["chunks"].sum().sort_index()


def _chunk_blank(rows: ShownRows, blank: Blanks, key: tuple, column: str, what: str) -> str | None:
    why = blank(*key)
    if why is None:
        n = int(sub(rows.requests, *key)[column].sum())
        if n:
            why = f"{n} counted requests {what}"
    return why


def step_histogram(rows: ShownRows) -> pd.DataFrame:
    """Per evaluation, engine and workload (and 'all'): the histogram of accepted draft tokens per
    verification step from the engine's counters where it reports them (source STEPS), else of
    tokens per chunk from the arena's own count (source CHUNKS, with `note` saying why the counters
    were not used); `share` sums to 1. A blank histogram is one row with the reason."""
    per = counter_deltas(rows, (PER_POS, "drafts"))
    blank = Blanks(rows)
    out = []
    for key, (deltas, note) in per.items():
        if note is None:
            counts, note = step_counts(deltas)
            if note is None:
                total = sum(counts)
                out += [(*key, STEPS, k, n, n / total, None, None) for k, n in enumerate(counts)]
                continue
        why = _chunk_blank(rows, blank, key, "timing_missing", "lack chunk times")
        counts = _chunk_counts(rows, key) if why is None else pd.Series(dtype=float)
        if why is None and counts.sum() > 0:
            total = float(counts.sum())
            out += [(*key, CHUNKS, int(t), int(n), n / total, None, note) for t, n in counts.items()]
        else:
            out.append((*key, CHUNKS, np.nan, np.nan, np.nan, why or "no streamed chunks", note))
    return pd.DataFrame(out, columns=STEP_COLUMNS)


def family_splits(rows: ShownRows, split: pd.DataFrame):
    """For a figure split by the session's family, per evaluation, engine and workload (and
    'all'): (key, the key's rows of `split`, why the figure cannot be shown or None). Why: the
    blank rule, a counted request without chunk times or without its session's sessions row (the
    family unknown), or no row of the split at all."""
    blank = Blanks(rows)
    for key in keys(rows, (*WORKLOADS, ALL)):
        c = sub(split, *key)
        why = (
            _chunk_blank(rows, blank, key, "timing_missing", "lack chunk times")
            or _chunk_blank(rows, blank, key, "session_missing", "have no sessions row (family and app unknown)")
            or ("no streamed chunks" if c.empty else None)
        )
        yield key, c, why


def by_family(rows: ShownRows) -> pd.DataFrame:
    """Tokens per chunk (the arena's count) per evaluation, engine and workload (and 'all'), split
    by the session's family and app; each family also as app 'all'. Blank when a counted request
    lacks chunk times or its session's sessions row."""
    out = []
    for key, c, why in family_splits(rows, rows.chunks):
        if why is not None:
            out.append((*key, None, None, np.nan, np.nan, np.nan, why))
            continue
        c = c.assign(weighted=c["tokens"] * c["chunks"])
        per_app = c.groupby(["family", "app"])[["chunks", "weighted"]].sum().reset_index()
        per_family = c.groupby("family")[["chunks", "weighted"]].sum().reset_index().assign(app=ALL)
        for r in pd.concat([per_app, per_family], ignore_index=True).itertuples():
            out.append((*key, r.family, r.app, int(r.chunks), int(r.weighted), r.weighted / r.chunks, None))
    return pd.DataFrame(out, columns=FAMILY_COLUMNS)


def _step_seconds(rows: ShownRows, blank: Blanks, key: tuple) -> tuple[float, str | None]:
    why = _chunk_blank(rows, blank, key, "timing_missing", "lack chunk times")
    if why is not None:
        return np.nan, why
    r = sub(rows.requests, *key)
    steps = r["decode_steps"].sum()
    if not steps > 0:
        return np.nan, "no counted request streamed two chunks or more"
    return float(r["decode_seconds"].sum() / steps), None


def speedup_proxy(rows: ShownRows) -> pd.DataFrame:
    """Per evaluation and workload: t_ar (the stock engine's seconds per step), t_sd (the
    candidate's), AL (the candidate's counters) and S = t_ar · AL / t_sd; NaN with the reason."""
    blank = Blanks(rows)
    counters = _counters(rows, ("drafts", "accepted_tokens"))
    out = []
    for e in rows.index["evaluation_id"]:
        for w in WORKLOADS:
            t_ar, why_ar = _step_seconds(rows, blank, (e, "stock", w))
            t_sd, why_sd = _step_seconds(rows, blank, (e, "candidate", w))
            deltas, why_al = counters[(e, "candidate", w)]
            al = np.nan if why_al else 1.0 + deltas[("accepted_tokens", None)] / deltas[("drafts", None)]
            reasons = [
                f"{what}: {why}" for what, why in (("stock", why_ar), ("candidate", why_sd), ("AL", why_al)) if why
            ]
            proxy = np.nan if reasons else t_ar * al / t_sd
            out.append((e, w, t_ar, t_sd, al, proxy, "; ".join(reasons) or None))
    return pd.DataFrame(out, columns=PROXY_COLUMNS)
