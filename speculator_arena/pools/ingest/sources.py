"""All sources of one build, read once per process, with their provenance for the data card.

The conversation sets come from a declaration (source_sets/): each set's records kept, or
dropped with a counted reason that the build's metadata and the data card show.

Why a process cache: the Dagster assets of one `arena pools build` run in one process and each
needs the same 125 MB ShareGPT file; reading it once keeps the build well under two minutes on
two cores. Assets hand each other small manifests, not the texts.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from speculator_arena.pools.ingest import app_readers, readers, trace_readers
from speculator_arena.pools.ingest.conversations import read_set, traj_files
from speculator_arena.pools.ingest.data_fetch import sha256_of
from speculator_arena.pools.ingest.source_sets import (
    SetDeclaration,
    declaration_file,
    load_declarations,
    load_traces,
)
from speculator_arena.pools.model import SourceConversation


@dataclass
class SourceInfo:
    name: str
    path: str
    records: int
    origin: str
    commit: str
    license: str
    sha256: str
    truncation: str | None = None
    notes: list[str] = field(default_factory=list)
    family: str = ""
    format: str = ""
    weight: float | None = None
    used: int | None = None  # conversations kept (declared sets)
    dropped: dict[str, int] = field(default_factory=dict)  # records left out, by reason


@dataclass
class Sources:
    data_dir: Path
    trajectories: list[dict]
    cc_traces: list[dict]
    chats: list[SourceConversation]
    agents: list[SourceConversation]
    mooncake: list[dict]
    azure_conv: list[dict]
    azure_code: list[dict]
    apps: list[app_readers.App]
    probes: list[dict]
    info: list[SourceInfo]
    weights: dict[str, float | None] = field(default_factory=dict)  # declared set -> weight
    declaration: str = ""


def _commit(readme: Path, near: str = "") -> str:
    """The commit a folder's README names for its upstream (`@ <hex>`), near `near` if given."""
    if not readme.is_file():
        return ""
    text = readme.read_text(encoding="utf-8", errors="replace")
    if near and near in text:
        text = text[text.index(near) :]
    m = re.search(r"@\s*([0-9a-f]{7,40})\b", text)
    return m.group(1) if m else ""


def _license(folder: Path, pattern: str = "LICENSE*") -> str:
    names = sorted(p.name for p in folder.glob(pattern))
    if not names:
        return "none declared"
    return ", ".join(names)


def _package_version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def _data_path(path: str, data: Path) -> Path:
    """A declared `path`: as given when absolute, else under the shared data folder."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else data / p


def _set_path(decl: SetDeclaration, data: Path) -> Path:
    return readers.package_data_file(decl.package) if decl.package else _data_path(decl.path, data)


TRACE_READERS = {"mooncake-jsonl": trace_readers.read_mooncake, "azure-csv": trace_readers.read_azure_csv}


def _digest(path: Path) -> str:
    if path.is_file():
        return sha256_of(path)
    h = hashlib.sha256()
    for f in traj_files(path):
        h.update(f.name.encode() + b"\0" + sha256_of(f).encode())
    return h.hexdigest()


def _read_sets(d: Path, decls: list[SetDeclaration], info: list[SourceInfo]):
    """Every declared set read in order; a conversation id already given by an earlier set is
    counted as a duplicate, not read twice (the ShareGPT sample repeats the package's records)."""
    chats: dict[str, SourceConversation] = {}
    agents: dict[str, SourceConversation] = {}
    trajectories: list[dict] = []
    for decl in decls:
        path = _set_path(decl, d)
        if not path.exists():
            raise FileNotFoundError(f"{path}: the file of the declared set {decl.name!r} does not exist")
        res = read_set(path, decl.format, decl.family, decl.id_prefix, decl.name)
        into = agents if decl.family == "agent" else chats
        used = 0
        for c in res.conversations:
            if c.source_id in chats or c.source_id in agents:
                res.dropped["duplicate of an earlier set's record"] += 1
                continue
            into[c.source_id] = c
            used += 1
        trajectories += res.trajectories
        origin = decl.origin or (
            f"pypi:{decl.package}=={_package_version(decl.package)}" if decl.package else str(path)
        )
        info.append(
            SourceInfo(
                decl.name,
                str(path),
                res.records,
                origin,
                _commit(d / decl.commit_from) if decl.commit_from else "",
                decl.license,
                _digest(path),
                res.truncation,
                list(res.notes),
                decl.family,
                decl.format,
                decl.weight,
                used,
                dict(sorted(res.dropped.items())),
            )
        )
    return trajectories, list(chats.values()), list(agents.values())


@lru_cache(maxsize=2)
def _load(data_dir: str, cc_path: str, declaration: str, _declaration_mtime: int = 0) -> Sources:
    d = Path(data_dir)
    info: list[SourceInfo] = []
    decls = load_declarations(declaration)
    trajectories, chats, agents = _read_sets(d, decls, info)

    def add(name, path, res, origin, commit, lic):
        info.append(
            SourceInfo(
                name,
                str(path),
                len(res),
                origin,
                commit,
                lic,
                sha256_of(Path(path)) if Path(path).is_file() else "",
                res.truncation,
                list(res.notes),
            )
        )

    cc: list[dict] = []
    if cc_path:
        res = trace_readers.read_cc_traces(Path(cc_path))
        cc = res.records
        add("AgentX cc-traces (Weka format)", cc_path, res, "huggingface: AgentX cc-traces", "", "see source")

    traces = {}
    for t in load_traces(declaration):  # the declared traces, in role order (source_sets/)
        path = _data_path(t.path, d)
        res = TRACE_READERS[t.format](path)
        lic = t.license + (f" ({_license(path.parent, t.license_files)})" if t.license_files else "")
        lic += f"; {t.license_note}" if t.license_note else ""
        add(t.name, path, res, t.origin, _commit(d / t.commit_from, t.commit_near) if t.commit_from else "", lic)
        traces[t.role] = res.records

    apps = app_readers.read_apps(d / "apps")
    for a in apps.records:
        folder = a.source.split("/")[0]
        info.append(
            SourceInfo(
                f"app {a.name}",
                str(d / "apps" / a.source),
                1,
                f"apps/{folder}",
                _commit(d / "apps" / "README.md", f"`{folder}/`"),
                a.license,
                sha256_of(d / "apps" / a.source),
            )
        )
    p = d / "probes" / "spec_bench_question.jsonl"
    pr = readers.read_spec_bench(p)
    add(
        "Spec-Bench questions",
        p,
        pr,
        "github:hemingkx/Spec-Bench data/spec_bench/question.jsonl",
        "",
        "Apache-2.0 (" + _license(d / "probes") + ")",
    )
    return Sources(
        d,
        trajectories,
        cc,
        chats,
        agents,
        traces["mooncake"],
        traces["azure_conv"],
        traces["azure_code"],
        apps.records,
        pr.records,
        info,
        {x.name: x.weight for x in decls},
        str(declaration_file(declaration)),
    )


def load_sources(data_dir: Path, cc_traces: str | Path | None = None, declaration: str | Path | None = None) -> Sources:
    """Every source of a build: the declared conversation sets and traces (source_sets/), then
    the apps and probes the structure and the gates need."""
    decl = declaration_file(declaration)
    return _load(
        str(Path(data_dir).resolve()), str(cc_traces or ""), str(decl), decl.stat().st_mtime_ns if decl.is_file() else 0
    )
