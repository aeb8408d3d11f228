"""The engine's `/metrics`, read before and after every pass (Prometheus text format).

Parsed with prometheus_client's own parser rather than by hand: histograms, labels with
escapes and `_created` samples all follow the format's rules there. Like every reader of engine
output, `scrape` is total: whatever the engine serves gives rows or none, never an exception.
"""

from __future__ import annotations

import json
import math
import re
import time

import httpx

MAX_METRICS_BYTES = 4 * 2**20  # a runner safeguard: vLLM's /metrics is a few hundred KB


def scrape(
    base_url: str, *, evaluation_id: str, pass_id: str, engine: str, phase: str, timeout: float = 10.0
) -> list[dict]:
    """Every sample of `/metrics` as raw rows; an engine without `/metrics` gives no rows.

    Total over what the engine serves: an error status, a body that is not Prometheus text, is
    longer than MAX_METRICS_BYTES, trickles past `timeout` (the whole read, not one recv) or
    breaks HTTP gives no rows; nothing scored needs them, and nothing here raises."""
    taken_at = time.time()
    text = _fetch(base_url.rstrip("/") + "/metrics", timeout)
    if text is None:
        return []
    return metric_rows(
        text, evaluation_id=evaluation_id, pass_id=pass_id, engine=engine, phase=phase, taken_at=taken_at
    )


def metric_rows(text: str, *, evaluation_id: str, pass_id: str, engine: str, phase: str, taken_at: float) -> list[dict]:
    """The `metrics` rows of one `/metrics` text, or none when it is not Prometheus text (total:
    nothing the text holds raises)."""
    rows = []
    try:
        for name, labels, value in samples(text):
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
    except Exception:  # noqa: BLE001 - not Prometheus text: nothing the arena can read, and nothing scored needs it
        return []
    return rows


def _fetch(url: str, timeout: float) -> str | None:
    """The body of a 200 answer as text (undecodable bytes replaced), or None."""
    deadline = time.time() + timeout
    data = bytearray()
    try:
        with httpx.Client(timeout=timeout, trust_env=False, headers={"Accept-Encoding": "identity"}) as c:
            with c.stream("GET", url) as resp:
                if resp.status_code != 200:
                    return None
                for part in resp.iter_raw():
                    data += part
                    if len(data) > MAX_METRICS_BYTES or time.time() > deadline:
                        return None
    except Exception:  # noqa: BLE001 - any failure of the engine's HTTP is no rows
        return None
    return data.decode("utf-8", "replace")


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
