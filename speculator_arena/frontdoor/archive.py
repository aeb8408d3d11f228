"""Safe extraction of an inline engine (a `.tar.gz`), member by member.

Why our own loop instead of `tarfile`'s "data" filter: the filter keeps paths, links and device
files in the directory but does not bound what a small archive expands to, and the runner's
Python (Debian's 3.11.2) has no filters at all. Here the archive is read as a stream and every
member is checked before a byte of it is written: a relative path with no `..`, a regular file,
a directory, or a link that stays inside; the running total of bytes and members is checked as
it grows, so a decompression bomb is refused after at most the bound has been read, never
written whole.
"""

from __future__ import annotations

import io
import os
import posixpath
import tarfile
import zlib
from pathlib import Path

from speculator_arena.frontdoor.errors import Refused

# Operational bounds of an extracted engine (not protocol values): the protocol's repository
# limit (repository_engine_max_mib) bounds the bytes; this bounds the number of entries.
MAX_MEMBERS = 20000


def _member_path(name: str) -> str:
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise Refused(f"engine archive: member {name!r} has an absolute path")
    norm = posixpath.normpath(name)
    if norm == ".." or norm.startswith("../") or ".." in name.split("/"):
        raise Refused(f"engine archive: member {name!r} climbs out of the directory ('..')")
    return norm


def _inside(rel_link_target: str) -> bool:
    return not (rel_link_target.startswith("/") or rel_link_target == ".." or rel_link_target.startswith("../"))


def _stays_inside(dest: Path, path: Path, name: str) -> None:
    """The real path (links followed) of `path` must lie in `dest`: links through links cannot escape."""
    root = os.path.realpath(dest)
    real = os.path.realpath(path)
    if real != root and not real.startswith(root + os.sep):
        raise Refused(f"engine archive: member {name!r} leads out of the directory through a link")


def extract_engine(data: bytes, dest: Path, max_bytes: int, max_members: int | None = None) -> dict:
    """Extract a gzip'd tar into `dest` (created); returns {'files': n, 'bytes': total}.

    Refused (nothing kept by the caller) when a member is unsafe or the bounds are passed.
    """
    max_members = MAX_MEMBERS if max_members is None else max_members
    dest.mkdir(parents=True)
    total = members = files = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|gz") as tf:
            for m in tf:
                members += 1
                if members > max_members:
                    raise Refused(f"engine archive: more than {max_members} members")
                rel = _member_path(m.name)
                if rel == ".":
                    continue
                target = dest / rel
                _stays_inside(dest, target.parent, m.name)
                if m.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                elif m.isfile():
                    total += m.size
                    if total > max_bytes:
                        raise Refused(f"engine archive: expands to more than {max_bytes:,} bytes")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    src = tf.extractfile(m)
                    written = 0
                    with open(target, "wb") as fh:
                        while block := src.read(1 << 20):
                            written += len(block)
                            fh.write(block)
                    if written != m.size:
                        raise Refused(f"engine archive: member {m.name!r} is truncated")
                    os.chmod(target, 0o755 if m.mode & 0o111 else 0o644)
                    files += 1
                elif m.issym():
                    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel), m.linkname))
                    if m.linkname.startswith("/") or not _inside(resolved):
                        raise Refused(f"engine archive: link {m.name!r} -> {m.linkname!r} leaves the directory")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(m.linkname, target)
                    _stays_inside(dest, target, m.name)
                elif m.islnk():
                    linked = _member_path(m.linkname)
                    if not (dest / linked).is_file() or (dest / linked).is_symlink():
                        raise Refused(
                            f"engine archive: hard link {m.name!r} -> {m.linkname!r} names no file extracted before it"
                        )
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.link(dest / linked, target)
                    files += 1
                else:
                    raise Refused(f"engine archive: member {m.name!r} is a device, fifo or other special file")
    except (tarfile.TarError, zlib.error, EOFError, OSError) as exc:
        raise Refused(f"engine archive is not a readable .tar.gz ({type(exc).__name__}: {exc})") from exc
    return {"files": files, "bytes": total}


def engine_root(dest: Path) -> Path:
    """The directory holding `launch.sh`: the archive's top, or its one top-level folder."""
    if (dest / "launch.sh").is_file():
        return dest
    subdirs = [d for d in dest.iterdir() if d.is_dir() and not d.is_symlink()]
    if len(subdirs) == 1 and (subdirs[0] / "launch.sh").is_file() and len(list(dest.iterdir())) == 1:
        return subdirs[0]
    raise Refused("engine has no launch.sh at its top (protocol section 2: `launch.sh serve` serves the target)")


def pack_engine(directory: Path) -> bytes:
    """A directory as the `.tar.gz` bytes an inline engine carries (what `arena submit` sends)."""
    directory = Path(directory)
    if not (directory / "launch.sh").is_file():
        raise ValueError(f"{directory} has no launch.sh at its top")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for path in sorted(directory.rglob("*")):
            if "__pycache__" in path.parts:
                continue
            tf.add(path, arcname=path.relative_to(directory).as_posix(), recursive=False)
    return buf.getvalue()
