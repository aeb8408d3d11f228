"""Readers of the traces the session structure is fitted from: AgentX cc-traces (the agent
family's turns, tokens and idle times), Mooncake's and Azure's serving traces (the chat
family's reply lengths, think times and shared prefixes).

Why one reader per format: see readers.py; each returns a `ReadResult`, and a broken record
raises `SourceFormatError` naming the file and the line, with every record read before it.
"""

from __future__ import annotations

import csv
from datetime import datetime
from pathlib import Path

from speculator_arena.pools.ingest.file_kinds import look
from speculator_arena.pools.ingest.readers import ReadResult, read_records
from speculator_arena.pools.ingest.source_errors import SourceFormatError

# ---- AgentX cc-traces (Weka format) -------------------------------------------------------------
_CC_REQUEST_KEYS = ("t", "in", "out")


def _cc_requests(reqs: list, depth: int = 0) -> list[dict]:
    out: list[dict] = []
    for r in reqs:
        if "requests" in r and isinstance(r["requests"], list) and not all(k in r for k in _CC_REQUEST_KEYS):
            out.extend(_cc_requests(r["requests"], depth + 1))  # a nested subagent
            continue
        for k in _CC_REQUEST_KEYS:
            if k not in r:
                raise KeyError(k)
        out.append(
            {
                "t": float(r["t"]),
                "in": int(r["in"]),
                "out": int(r["out"]),
                "hash_ids": list(r.get("hash_ids") or []),
                "think_time": float(r.get("think_time") or 0.0),
                "api_time": float(r.get("api_time") or 0.0),
                "type": r.get("type", ""),
                "depth": depth,
            }
        )
        if isinstance(r.get("requests"), list):
            out.extend(_cc_requests(r["requests"], depth + 1))
    return out


def _cc_trace(obj: dict) -> dict:
    reqs = obj["requests"]
    if not isinstance(reqs, list):
        raise TypeError("requests must be a list")
    return {
        "id": str(obj["id"]),
        "block_size": int(obj.get("block_size") or 0),
        "system_tokens": int(obj.get("system_tokens") or 0),
        "tool_tokens": int(obj.get("tool_tokens") or 0),
        "requests": _cc_requests(reqs),
    }


def read_cc_traces(path: Path) -> ReadResult:
    """AgentX cc-traces in the Weka format: a JSON list of traces, or one trace per line,
    compressed or not, streamed.

    Per trace `id, block_size, tool_tokens, system_tokens, requests[]`; per request
    `t, type, model, in, out, hash_ids, input_types, output_types, stop, api_time,
    think_time`, with subagents nested as `requests` of their own (flattened here, depth kept).
    """
    path = Path(path)
    return read_records(path, _cc_trace, "json" if look(path).kind == "json" else "jsonl")


# ---- serving traces ---------------------------------------------------------------------------
def _mooncake(obj: dict) -> dict:
    return {
        "timestamp_ms": float(obj["timestamp"]),
        "input_length": int(obj["input_length"]),
        "output_length": int(obj["output_length"]),
        "hash_ids": [int(h) for h in obj["hash_ids"]],
    }


def read_mooncake(path: Path) -> ReadResult:
    """Mooncake FAST'25 JSONL: `timestamp` (ms), `input_length`, `output_length`, `hash_ids`."""
    return read_records(Path(path), _mooncake)


def read_azure_csv(path: Path) -> ReadResult:
    """Azure LLM inference trace CSV: `TIMESTAMP, ContextTokens, GeneratedTokens`."""
    path = Path(path)
    records: list = []
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} - set(reader.fieldnames or [])
        if missing:
            raise SourceFormatError(path, "header", f"missing columns {sorted(missing)}")
        rows = enumerate(reader, 2)
        while True:
            try:
                lineno, row = next(rows)
            except StopIteration:
                break
            except UnicodeDecodeError as exc:
                raise SourceFormatError(
                    path, f"after line {len(records) + 1}", f"not UTF-8 ({exc.reason})", records
                ) from None
            try:
                ts = row["TIMESTAMP"]
                main, _, frac = ts.partition(".")
                t = datetime.strptime(main, "%Y-%m-%d %H:%M:%S").timestamp() + (float("0." + frac) if frac else 0.0)
                records.append(
                    {
                        "t": t,
                        "context_tokens": int(row["ContextTokens"]),
                        "generated_tokens": int(row["GeneratedTokens"]),
                    }
                )
            except (TypeError, ValueError) as exc:
                raise SourceFormatError(path, f"line {lineno}", f"bad row: {exc}", records) from exc
    return ReadResult(str(path), records)
