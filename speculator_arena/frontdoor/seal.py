"""The sealed store: submitted engines and speculators, content-addressed and read-only.

Layout: `$ARENA_HOME/sealed/<digest>/manifest.json` and `.../tree/` (what the engine gets as its
engine directory or `SPECULATOR`). The manifest is `checkpoints.seal`'s (sha256 and size of every
file, the same code that seals target checkpoints); the digest names the directory and is the
sha256 of the manifest's file list, so two identical submissions share one copy and a changed
byte cannot keep its name. The runner calls `verify_sealed` before the engine starts: every file
re-hashed, nothing missing, nothing added, the name still the digest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from speculator_arena.checkpoints.seal import MANIFEST, read_manifest, seal, unseal, verify_manifest, write_manifest
from speculator_arena.warehouse import arena_home

TREE = "tree"


class SealBroken(RuntimeError):
    """A sealed directory no longer matches its manifest: the evaluation must not start."""


def store_dir(home=None) -> Path:
    return arena_home(home) / "sealed"


def staging_dir(home=None) -> Path:
    """Where intake extracts and fetches before sealing: same filesystem as the store (atomic rename)."""
    d = arena_home(home) / "frontdoor" / "staging"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _digest(manifest: dict) -> str:
    listing = {rel: entry["sha256"] for rel, entry in manifest["files"].items()}
    return hashlib.sha256(json.dumps(listing, sort_keys=True).encode()).hexdigest()


def seal_tree(staged: Path, kind: str, source: str, home=None) -> tuple[str, Path]:
    """Move `staged/tree` into the store under its digest, sealed; returns (digest, tree path).

    `staged` is a fresh directory under `staging_dir()` holding `tree/`; it is consumed.
    """
    manifest = write_manifest(staged, {"kind": kind, "source": source})
    digest = _digest(manifest)
    final = store_dir(home) / digest
    final.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(final.parent, 0o700)  # the engine's user reaches its own inputs only as the runner stages them
    if final.exists() and not verify_manifest(final, full=True):
        shutil.rmtree(staged)  # the same bytes are already sealed
    else:
        if final.exists():  # a torn copy (crash mid-rename cannot happen; a tampered one can)
            unseal_and_remove(final)
        seal(staged)
        os.replace(staged, final)
    return digest, final / TREE


def unseal_and_remove(entry: Path) -> None:
    unseal(entry)
    shutil.rmtree(entry)


def sealed_root(path: str | os.PathLike | None, home=None) -> Path | None:
    """The store entry a path belongs to, or None for paths outside the sealed store."""
    if not path:
        return None
    p = Path(path).resolve()
    root = store_dir(home).resolve()
    if p.parent.parent == root and p.name == TREE:
        return p.parent
    return None


def verify_sealed(path: str | os.PathLike | None, home=None) -> str | None:
    """Re-hash a sealed tree against its manifest; returns its digest (None: not a sealed path)."""
    entry = sealed_root(path, home)
    if entry is None:
        return None
    problems = verify_manifest(entry, full=True)
    manifest = read_manifest(entry) or {"files": {}}
    listed = set(manifest["files"])
    present = {p.relative_to(entry).as_posix() for p in entry.rglob("*") if p.is_file() and p.name != MANIFEST}
    problems += [f"unlisted file {rel}" for rel in sorted(present - listed)]
    if not problems and _digest(manifest) != entry.name:
        problems.append("the manifest's digest is not the directory's name")
    if problems:
        raise SealBroken(f"sealed {entry.name[:12]} does not match its manifest: {'; '.join(problems[:5])}")
    return entry.name


def sealed_provenance(engine: str | None, speculator: str | None, home=None) -> dict:
    """The digests an evaluation records (the board's provenance shows them); {} for operator runs."""
    out = {}
    for name, path in (("engine", engine), ("speculator", speculator)):
        entry = sealed_root(path, home)
        if entry is not None:
            out[f"{name}_sealed_digest"] = entry.name
            out[f"{name}_sealed_source"] = (read_manifest(entry) or {}).get("source")
    return out


def verify_sealed_inputs(engine: str | None, speculator: str | None, home=None) -> None:
    """What the runner calls before an engine starts: SealBroken when a sealed input changed."""
    verify_sealed(engine, home)
    verify_sealed(speculator, home)
