"""Where the protocol's versions are, and their digests.

A version is a YAML file: shipped with the package, published by an operator under
`$ARENA_HOME`, or staged by hand under `ARENA_PROTOCOL_DIR`; its digest (the sha256 of its
canonical JSON) is what the warehouse pins scores to. Apart from the model (model.py): finding
and digesting a version needs no pydantic, and the model's loader reads its files from here.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from speculator_arena import settings


def published_versions_dir(home=None) -> Path:
    """Where `arena protocol publish` writes the versions an operator published (with who and
    when beside each): `$ARENA_HOME/protocol/versions`. Candidates of a calibration live apart
    (`$ARENA_HOME/calibration/`) and are never versions until published."""
    return settings.arena_home(home) / "protocol" / "versions"


def _versions_dirs() -> list:
    """The shipped versions, then the published ones of this ARENA_HOME, then `ARENA_PROTOCOL_DIR`
    (where tests and operators stage a version by hand).

    A later directory may add a version but never replace an earlier one's: versions are immutable.
    """
    dirs = [resources.files("speculator_arena.protocol") / "versions", published_versions_dir()]
    extra = settings.get("ARENA_PROTOCOL_DIR")
    if extra:
        dirs.append(Path(extra))
    return dirs


def _version_files() -> dict[int, Any]:
    found: dict[int, Any] = {}
    for d in _versions_dirs():
        if not d.is_dir():
            continue
        for entry in d.iterdir():
            m = re.fullmatch(r"v(\d+)\.yaml", entry.name)
            if m:
                found.setdefault(int(m.group(1)), entry)
    return found


def version_path(version: int):
    """The file of a version (shipped, published or staged)."""
    path = _version_files().get(version)
    if path is None:
        raise KeyError(f"no protocol version {version}; available: {available_versions()}")
    return path


def available_versions() -> list[int]:
    return sorted(_version_files())


def _raw_text(version: int) -> str:
    return version_path(version).read_text(encoding="utf-8")


def document_digest(data: dict) -> str:
    """sha256 of a protocol document's canonical JSON (the parsed YAML)."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def protocol_digest(version: int) -> str:
    """sha256 of the version's canonical JSON: what the warehouse pins scores to."""
    return _text_digest(_raw_text(version))


@lru_cache(maxsize=64)
def _text_digest(text: str) -> str:
    # parsing a version's YAML costs tens of milliseconds; the score store's prune digests every version
    return document_digest(yaml.safe_load(text))
