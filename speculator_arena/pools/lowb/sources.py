"""The declared item sources (`sources.yaml`) and the readers of the package and file kinds.

Why declarations and not code: which benchmarks a pool holds, where each comes from and under
which license is the operators' data; the data card quotes it and an operator adds a benchmark
(its file, its field mapping) without touching code. RULER's generated items are in
`ruler_items.py`.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import importlib.resources
import json
from pathlib import Path

import yaml

from speculator_arena import settings
from speculator_arena.pools.lowb.model import Candidate, ItemPoolError

DEFAULT = Path(__file__).with_name("sources.yaml")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def load_sources(path: str | Path | None = None) -> list[dict]:
    """The declared sources: the default file, or an operator's file (`extends: default` keeps
    the default entries its own do not replace, by `benchmark`)."""
    doc = _read_yaml(DEFAULT)
    entries = {e["benchmark"]: dict(e, declared_in=str(DEFAULT)) for e in doc["sources"]}
    if path is not None:
        own = _read_yaml(Path(path))
        base_dir = Path(path).resolve().parent
        mine = {}
        for e in own.get("sources") or []:
            e = dict(e, declared_in=str(path))
            if e.get("path") and not Path(e["path"]).is_absolute():
                e["path"] = str(base_dir / e["path"])
            mine[e["benchmark"]] = {**entries.get(e["benchmark"], {}), **e}
        entries = {**entries, **mine} if own.get("extends") == "default" else mine
    return list(entries.values())


def _read_yaml(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ItemPoolError(f"{path}: cannot read the item sources: {exc}") from exc
    if not isinstance(doc.get("sources", []), list):
        raise ItemPoolError(f"{path}: `sources` must be a list")
    return doc


def source_path(entry: dict) -> Path | None:
    """A file source's path: its `path`, else the declared setting its `path_setting` names;
    None when not given (the benchmark is lacking)."""
    if entry.get("path"):
        return Path(entry["path"])
    name = entry.get("path_setting")
    if name and name in settings.VARIABLES:
        return settings.path(name)
    return None


def available(entry: dict) -> bool:
    if entry["kind"] in ("package", "ruler"):
        try:
            importlib.metadata.version(entry["package"])
        except importlib.metadata.PackageNotFoundError:
            return False
        return True
    return source_path(entry) is not None


def installed_version(entry: dict) -> str | None:
    try:
        return importlib.metadata.version(entry["package"])
    except (KeyError, importlib.metadata.PackageNotFoundError):
        return None


def read_candidates(entry: dict) -> list[Candidate]:
    """Every item of a package or file source, mapped by its `fields`, in file order."""
    if entry["kind"] == "package":
        path = Path(str(importlib.resources.files(entry["module"]).joinpath(entry["file"])))
    else:
        path = source_path(entry)
        if path is None:
            raise ItemPoolError(f"{entry['benchmark']}: no file declared")
    return [_candidate(entry, rec, n, path) for n, rec in _records(path, entry.get("format", "jsonl"))]


def _records(path: Path, fmt: str):
    """(line or index, record) of a JSON Lines, JSON array or Parquet file (gzip told by its bytes)."""
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            yield from enumerate(pq.read_table(path).to_pylist(), 1)
            return
        with open(path, "rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
        opener = gzip.open if gz else open
        with opener(path, "rt", encoding="utf-8") as fh:
            if fmt == "json":
                yield from enumerate(json.load(fh), 1)
                return
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        yield n, json.loads(line)
                    except ValueError as exc:
                        raise ItemPoolError(f"{path}:{n}: not a JSON record: {exc}") from exc
    except ItemPoolError:
        raise
    except (OSError, ValueError, EOFError) as exc:
        raise ItemPoolError(f"{path}: cannot read the declared item file: {exc}") from exc
    except Exception as exc:  # pyarrow's errors are not OSError subclasses everywhere
        raise ItemPoolError(f"{path}: cannot read the declared item file: {type(exc).__name__}: {exc}") from exc


def _field(rec: dict, dotted: str):
    value = rec
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


def _candidate(entry: dict, rec, n: int, path: Path) -> Candidate:
    if not isinstance(rec, dict):
        raise ItemPoolError(f"{path}:{n}: a record must be a JSON object")
    try:
        mapped = {name: _field(rec, src) for name, src in entry["fields"].items()}
    except KeyError as exc:
        raise ItemPoolError(f"{path}:{n}: the record has no field {exc.args[0]!r} (declared in `fields`)") from exc
    if "choices" in mapped:
        if not isinstance(mapped["choices"], list) or not mapped["choices"]:
            raise ItemPoolError(f"{path}:{n}: `choices` must be a non-empty list")
        mapped["choices_lettered"] = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(mapped["choices"]))
    if isinstance(mapped.get("tests"), list):
        mapped["tests_lines"] = "\n".join(str(t) for t in mapped["tests"])
    try:
        prompt = entry["prompt"].format(**mapped)
    except (KeyError, IndexError, ValueError) as exc:
        raise ItemPoolError(f"{entry.get('declared_in')}: {entry['benchmark']}'s prompt needs {exc}") from exc
    grader = {"kind": entry["grader"]["kind"]}
    grader.update({k: mapped[v] for k, v in entry["grader"].items() if k != "kind"})
    record_id = mapped.get("id", n)
    text = "\n".join(str(mapped[k]) for k in ("prompt", "question", "problem", "text", "context") if k in mapped)
    return Candidate(
        source_id=f"lowb:{entry['benchmark']}:{record_id}",
        benchmark=entry["benchmark"],
        messages=[{"role": "user", "content": prompt}],
        grader=grader,
        text=text or None,
    )
