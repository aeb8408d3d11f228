"""The engine's `/metrics`, read before and after every pass (Prometheus text format).

Parsed with prometheus_client's own parser rather than by hand: histograms, labels with
escapes and `_created` samples all follow the format's rules there.
"""

from __future__ import annotations

import json
import math
import re
import time

import httpx


def scrape(
    base_url: str, *, evaluation_id: str, pass_id: str, engine: str, phase: str, timeout: float = 10.0
) -> list[dict]:
    """Every sample of `/metrics` as raw rows; an engine without `/metrics` gives no rows."""
    taken_at = time.time()
    try:
        resp = httpx.get(base_url.rstrip("/") + "/metrics", timeout=timeout, trust_env=False)
    except httpx.HTTPError:
        return []
    if resp.status_code != 200:
        return []
    rows = []
    try:
        for name, labels, value in samples(resp.text):
            if math.isnan(value):
                continue
            rows.append(
                {
                    "evaluation_id": evaluation_id,
                    "pass_id": pass_id,
                    "engine": engine,
                    "phase": phase,
                    "taken_at": taken_at,
                    "name": name,
                    "labels": json.dumps(labels, sort_keys=True),
                    "value": value,
                }
            )
    except ValueError:  # not Prometheus text: nothing the arena can read, and nothing scored needs it
        return []
    return rows


def samples(text: str):
    """(name, labels, value) of every sample: prometheus_client's parser when installed.

    The GPU image may lack prometheus_client; there a small parser of the text format's sample
    lines (`name{k="v",...} value [timestamp]`) reads what the arena shows (counters, gauges).
    """
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        yield from _simple_samples(text)
        return
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.value is not None:
                yield s.name, dict(s.labels), float(s.value)


_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _simple_samples(text: str):
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            raise ValueError(f"not a Prometheus sample line: {line[:80]!r}")
        labels = {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL.findall(m.group(2) or "")}
        yield m.group(1), labels, float(m.group(3))
