"""Manifest and read-only seal of a checkpoint directory.

Why a manifest of sha256 digests: the arena must be able to show that the target an engine was
given is byte for byte the one it prepared, and a later `prepare_checkpoint` must tell a whole
directory from one a crash left half written. Why chmod a-w but readable by all: the engine runs
as an unprivileged user that must read the weights and must not change them.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from speculator_arena.atomic import write_json_atomic

MANIFEST = "manifest.json"


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def write_manifest(directory: Path, meta: dict) -> dict:
    """Hash every file of `directory` (but the manifest) into `manifest.json`, written atomically."""
    files = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST):
        rel = path.relative_to(directory).as_posix()
        files[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    manifest = {**meta, "files": files, "total_bytes": sum(f["bytes"] for f in files.values())}
    write_json_atomic(directory / MANIFEST, manifest, indent=2, sort_keys=True)
    return manifest


def read_manifest(directory: str | os.PathLike) -> dict | None:
    path = Path(directory) / MANIFEST
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def verify_manifest(directory: str | os.PathLike, full: bool = False) -> list[str]:
    """Problems found (empty when whole). `full` re-hashes every file; otherwise sizes only,
    which is what a reuse needs to tell a finished directory from a torn one, in milliseconds."""
    directory = Path(directory)
    manifest = read_manifest(directory)
    if manifest is None:
        return [f"no readable {MANIFEST} in {directory}"]
    problems = []
    for rel, entry in manifest.get("files", {}).items():
        path = directory / rel
        if not path.is_file():
            problems.append(f"missing {rel}")
        elif path.stat().st_size != entry["bytes"]:
            problems.append(f"size of {rel} is {path.stat().st_size}, manifest says {entry['bytes']}")
        elif full and sha256_file(path) != entry["sha256"]:
            problems.append(f"sha256 of {rel} differs from the manifest")
    return problems


def seal(directory: Path) -> None:
    """Make the tree read-only for everyone and readable (and traversable) by everyone; executable files
    stay executable, links are left as they are (chmod would follow them)."""
    for path in sorted(directory.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        mode = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
        if path.is_symlink():
            continue
        if path.is_dir() or path.stat().st_mode & stat.S_IXUSR:  # directories, and executables stay so
            mode |= stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
        os.chmod(path, mode)
    os.chmod(directory, 0o555)


def unseal(directory: Path) -> None:
    """Give the owner write access to the tree's folders again, so that it can be removed (a torn or
    stale directory is replaced whole). The files keep their modes: removing a file takes a writable
    folder, not a writable file, and a target copied from the checkpoint cache shares its files'
    inodes with the cache and every other copy (prepare.py links them), whose modes a chmod here
    would change under them."""
    for path in [directory, *directory.rglob("*")]:
        try:
            if path.is_dir() and not path.is_symlink():
                os.chmod(path, path.stat().st_mode | stat.S_IWUSR | stat.S_IRUSR | stat.S_IXUSR)
        except OSError:
            pass
