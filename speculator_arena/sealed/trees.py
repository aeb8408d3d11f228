"""Directory trees walked without recursion and without following a link: what the front door
uses on every tree a submission made (extracted archives, fetched repositories, staging left by
a killed server, sealed copies being removed).

Why our own walk instead of `os.walk`, `Path.rglob` and `shutil.rmtree`: those recurse (in 3.11
`shutil.rmtree` and `rglob` do), so a 1,300-level tree raises RecursionError, and a path that
deep is longer than PATH_MAX, so any walk by path fails. Here one directory descriptor moves down
by name (`O_NOFOLLOW | O_DIRECTORY`: a link is never entered) and back up by `..`; only the names
still to visit are kept per level, so depth costs memory for names, not file descriptors or
stack frames.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Entry:
    rel: str  # the path under the root, '/'-separated
    depth: int  # 1 for the root's own entries
    st: os.stat_result  # lstat: a link is a link


def _names(fd: int) -> deque[str]:
    with os.scandir(fd) as it:
        return deque(sorted(e.name for e in it))


def walk(root: str | os.PathLike, *, post_order: bool = False, writable: bool = False) -> Iterator[Entry]:
    """Every entry under `root` (not `root` itself), depth first, links never followed.

    `post_order`: a directory is yielded after its entries. `writable`: each directory is made
    writable by its owner before it is read (sealed trees are 0555).
    """
    for entry, _fd, _name in walk_at(root, post_order=post_order, writable=writable):
        yield entry


def walk_at(root, *, post_order: bool = False, writable: bool = False) -> Iterator[tuple[Entry, int, str]]:
    """`walk`'s entries with the descriptor of the directory holding each and its name there (valid
    until the next item), so that the caller acts on the entry itself, never on a path to it.
    `root` may be a directory descriptor (the caller keeps it)."""
    fd = os.dup(root) if isinstance(root, int) else os.open(root, DIR_FLAGS)
    if writable:
        _make_writable(fd)
    parts: list[str] = []
    pending: list[tuple[deque[str], Entry | None]] = [(_names(fd), None)]
    try:
        while pending:
            names, _ = pending[-1]
            if not names:
                _, done = pending.pop()
                if parts:
                    up = os.open("..", DIR_FLAGS, dir_fd=fd)
                    os.close(fd)
                    fd = up
                    name = parts.pop()
                    if done is not None and post_order:
                        yield done, fd, name
                continue
            name = names.popleft()
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            entry = Entry("/".join([*parts, name]), len(parts) + 1, st)
            if not stat.S_ISDIR(st.st_mode):
                yield entry, fd, name
                continue
            if not post_order:
                yield entry, fd, name
            child = os.open(name, DIR_FLAGS, dir_fd=fd)
            if writable:
                _make_writable(child)
            os.close(fd)
            fd = child
            parts.append(name)
            pending.append((_names(fd), entry))
    finally:
        os.close(fd)


def _make_writable(fd: int) -> None:
    mode = os.fstat(fd).st_mode
    if mode & stat.S_IRWXU != stat.S_IRWXU:
        try:
            os.fchmod(fd, stat.S_IMODE(mode) | stat.S_IRWXU)
        except PermissionError:
            pass  # not ours: the removal says what it could not remove


def remove_tree(path: str | os.PathLike, *, missing_ok: bool = True) -> None:
    """Remove a file, link or directory tree of any depth; links are removed, never followed.

    Read-only directories (sealed trees) are made writable first. OSError when something could
    not be removed (what could be removed is gone).
    """
    path = Path(path)
    try:
        st = path.lstat()
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    if not stat.S_ISDIR(st.st_mode):
        path.unlink()
        return
    for entry, fd, name in walk_at(path, post_order=True, writable=True):
        try:
            if stat.S_ISDIR(entry.st.st_mode):
                os.rmdir(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
    path.rmdir()


def resolves_inside(root: str | os.PathLike, rel: str, max_links: int = 40) -> bool:
    """Whether the path `rel` under `root`, every link on the way followed, stays in `root`.

    Resolved component by component with `root` as the top (a `..` above it is out, an absolute
    link target is out, a loop of links is out), by lstat and readlink relative to `root` itself:
    `os.path.realpath` works on absolute paths and, where a folder above `root` cannot be read,
    silently stops resolving, which would turn this check into a lexical one.
    """
    root = Path(root)
    todo = [c for c in rel.split("/") if c]
    done: list[str] = []
    links = 0
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not done:
                return False
            done.pop()
            continue
        path = root.joinpath(*done, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            done.append(part)  # a dangling name: the rest is lexical (nothing there to follow)
            continue
        if not stat.S_ISLNK(st.st_mode):
            done.append(part)
            continue
        links += 1
        target = os.readlink(path)
        if links > max_links or target.startswith("/"):
            return False
        todo = [c for c in target.split("/") if c] + todo
    return True
