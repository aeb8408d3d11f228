"""Readers of the apps: the system prompts and tool schemas of the public agent frameworks
and chat environments in `apps/` (mini-swe-agent, SWE-agent, OpenHands, smolagents,
tau-bench), which the sessions of each app share as their prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from speculator_arena.pools.ingest.readers import ReadResult
from speculator_arena.pools.ingest.source_errors import SourceFormatError


# ---- apps: system prompts and tool descriptions --------------------------------------------------
@dataclass
class App:
    """One agent framework's shared system prompt and tool schemas (OpenAI format)."""

    name: str
    family: str
    system_prompt: str
    tools: list[dict[str, Any]]
    source: str
    license: str


def _license_of(folder: Path) -> str:
    for p in sorted(folder.glob("LICENSE*")):
        head = p.read_text(encoding="utf-8", errors="replace")[:400]
        if "MIT" in head:
            return f"MIT ({p.name})"
        if "Apache" in head:
            return f"Apache-2.0 ({p.name})"
        return p.name
    return "unknown"


def _strip_jinja(text: str) -> str:
    """Framework prompts are templates; keep their prose and drop the template logic, since a
    served app sends the rendered text and the arena has no values for the variables."""
    import re

    text = re.sub(r"\{#.*?#\}", "", text, flags=re.S)
    text = re.sub(r"\{%.*?%\}", "", text, flags=re.S)
    text = re.sub(r"\{\{.*?\}\}", "", text, flags=re.S)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _swe_tool_schemas(tools_dir: Path) -> list[dict]:
    tools: list[dict] = []
    for cfg in sorted(tools_dir.glob("*/config.yaml")):
        try:
            data = yaml.safe_load(cfg.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise SourceFormatError(cfg, "yaml", str(exc)) from exc
        for name, spec in (data.get("tools") or {}).items():
            props, required = {}, []
            for arg in spec.get("arguments") or []:
                props[arg["name"]] = {"type": arg.get("type", "string"), "description": arg.get("description", "")}
                if arg.get("required"):
                    required.append(arg["name"])
            tools.append(
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": spec.get("docstring", "") or spec.get("signature", ""),
                        "parameters": {"type": "object", "properties": props, "required": required},
                    },
                }
            )
    return tools


def read_apps(apps_dir: Path) -> ReadResult:
    """System prompts and tool schemas of the public agent frameworks in `apps/`."""
    apps_dir = Path(apps_dir)
    apps: list[App] = []

    def load_yaml(p: Path) -> dict:
        try:
            return yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise SourceFormatError(p, "yaml", str(exc), apps) from exc

    def add(name: str, family: str, rel: str, system, tools=list) -> None:
        """The app whose prompt file is `rel` (its license from the folder `rel` starts with),
        when the file is there: `system(path)` reads its prompt, then `tools()` its schemas."""
        p = apps_dir / rel
        if p.is_file():
            prompt = system(p)
            apps.append(
                App(
                    name,
                    family,
                    prompt,
                    tools(),
                    str(p.relative_to(apps_dir)),
                    _license_of(apps_dir / rel.split("/")[0]),
                )
            )

    add(
        "mini-swe-agent",
        "agent",
        "mini-swe-agent/src/minisweagent/config/default.yaml",
        lambda p: _strip_jinja(load_yaml(p)["agent"]["system_template"]),
    )
    add(
        "swe-agent",
        "agent",
        "swe-agent/config/default.yaml",
        lambda p: _strip_jinja(load_yaml(p)["agent"]["templates"]["system_template"]),
        lambda: _swe_tool_schemas(apps_dir / "swe-agent/tools"),
    )
    add(
        "openhands",
        "agent",
        "openhands/openhands/agenthub/codeact_agent/prompts/system_prompt.j2",
        lambda p: _strip_jinja(p.read_text(encoding="utf-8")),
    )
    add(
        "smolagents",
        "agent",
        "smolagents/src/smolagents/prompts/toolcalling_agent.yaml",
        lambda p: _strip_jinja(load_yaml(p)["system_prompt"]),
    )
    for env in ("airline", "retail"):
        add(
            f"tau-bench-{env}",
            "chat",
            f"tau-bench/tau_bench/envs/{env}/wiki.md",
            lambda p: p.read_text(encoding="utf-8").strip(),
        )
    if not apps:
        raise SourceFormatError(apps_dir, "folder", "no known app prompt files found")
    return ReadResult(str(apps_dir), apps)
