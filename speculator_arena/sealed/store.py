"""The sealed store: submitted engines and speculators, content-addressed and read-only.

Layout: `$ARENA_HOME/sealed/<digest>/manifest.json` and `.../tree/` (what the engine gets as its
engine directory or `SPECULATOR`). The manifest is `checkpoints.seal`'s (sha256 and size of every
file, the same code that seals target checkpoints); the digest names the directory and is the
sha256 of the manifest's file list, so two identical submissions share one copy and a changed
byte cannot keep its name. The runner calls `verify_sealed` before the engine starts: every file
re-hashed, nothing missing, nothing added, the name still the digest.

Two steps, in two processes: `seal_in_place` (hash and make read-only) runs in the intake's
child, on a tree whose links were checked to stay inside it; `store` (move into the store under
its digest) runs in the API, inside the transaction that inserts the submission's row, so a
refused or failed intake, or one that lost the race for the last quota slot, leaves no sealed
copy, and two intakes of the same bytes cannot both move theirs.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from speculator_arena.checkpoints.seal import MANIFEST, read_manifest, seal, verify_manifest, write_manifest
from speculator_arena.errors import ArenaError
from speculator_arena.sealed.trees import remove_tree
from speculator_arena.settings import arena_home

TREE = "tree"
MAX_MANIFEST_BYTES = 64 * 2**20


class SealBroken(RuntimeError, ArenaError):
    """A sealed directory no longer matches its manifest: the evaluation must not start."""


def store_dir(home=None) -> Path:
    return arena_home(home) / "sealed"


def _digest(manifest: dict) -> str:
    listing = {rel: entry["sha256"] for rel, entry in manifest["files"].items()}
    return hashlib.sha256(json.dumps(listing, sort_keys=True).encode()).hexdigest()


def seal_in_place(staged: Path, meta: dict) -> dict:
    """Hash `staged/tree` into `staged/manifest.json` and make both read-only (`staged` itself
    stays writable: moving a directory needs write access to it). Returns the manifest."""
    manifest = write_manifest(staged, meta)
    seal(staged / TREE)
    os.chmod(staged / MANIFEST, 0o444)
    return manifest


def store(staged: Path, home=None) -> tuple[str, Path]:
    """Move a sealed `staged` (tree and manifest) into the store under its digest; returns
    (digest, tree path). Identical bytes already sealed and whole are kept, and `staged` is left
    for its sandbox's removal. Call it inside the transaction that names the digest in a row."""
    for d in (staged, staged / TREE):  # what the child made: moved as it is, so never a link
        if not stat.S_ISDIR(d.lstat().st_mode):
            raise SealBroken(f"the staged {d.name} is not a directory")
    mpath = staged / MANIFEST
    st = mpath.lstat()
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MANIFEST_BYTES:
        raise SealBroken("the staged manifest is not a regular file of a sane size")
    manifest = read_manifest(staged)
    if manifest is None:
        raise SealBroken("the staged manifest cannot be read")
    digest = _digest(manifest)
    final = store_dir(home) / digest
    if not final.parent.exists():
        final.parent.mkdir(parents=True, exist_ok=True)
        # the engine's user reaches its own inputs only as the runner stages them; the kubernetes
        # launcher opens it for traversal (`open_for_pods`), which a later seal leaves as it is
        os.chmod(final.parent, 0o700)
    if final.exists():
        if not verify_manifest(final, full=True):
            return digest, final / TREE
        remove_tree(final)  # torn or tampered: replaced by the copy just checked
    os.rename(staged, final)
    os.chmod(final, 0o555)
    return digest, final / TREE


def open_for_pods(home=None) -> None:
    """The store made traversable by every uid (0711: no listing, each entry reached by its digest).
    Why: on the kubernetes backend the pods' runner reads a submission's sealed engine at its path
    on the artifacts volume (the store lies there, docs/operators/kubernetes.md), under a uid of the pods';
    no engine runs on the launcher's machine, and an engine's container mounts only its own
    inputs, so the 0700 that keeps a local engine user out protects nothing there."""
    d = store_dir(home)
    if d.is_dir() and stat.S_IMODE(d.stat().st_mode) != 0o711:
        os.chmod(d, 0o711)


def seal_tree(staged: Path, kind: str, source: str, home=None) -> tuple[str, Path]:
    """Seal and store a tree the arena itself made (never a submission's: those are sealed in
    the intake's child). `staged` holds `tree/`; it is consumed."""
    seal_in_place(staged, {"kind": kind, "source": source})
    digest, tree = store(staged, home)
    remove_tree(staged)
    return digest, tree


def remove_sealed(entry: Path) -> None:
    remove_tree(entry)


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
            manifest = read_manifest(entry) or {}
            out[f"{name}_sealed_digest"] = entry.name
            out[f"{name}_sealed_source"] = manifest.get("source")
            if manifest.get("intake_user"):
                out[f"{name}_intake_user"] = manifest["intake_user"]
    return out


def verify_sealed_inputs(engine: str | None, speculator: str | None, home=None) -> None:
    """What the runner calls before an engine starts: SealBroken when a sealed input changed."""
    verify_sealed(engine, home)
    verify_sealed(speculator, home)
